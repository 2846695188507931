import { isLoopbackHttpUrl } from "../../core/net/loopback.js";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import * as client from "openid-client";
import { Code, ManentError } from "../../core/errors.js";
import { freshIdToken, loadLogin, saveLogin, type StoredLogin } from "./credentials.js";

/** What the server says of its provider (GET /auth/oidc). */
export interface ProviderInfo {
  issuer: string;
  client_id: string;
  scopes: string[];
}

/**
 * How `manent login` reaches the two parties: manent-server through the command's transport (its
 * `--ca-file` and client certificate), the OpenID provider through its own (see tls-transport.ts).
 * Undefined: Node's fetch.
 */
export interface LoginTransports {
  server?: typeof fetch;
  provider?: typeof fetch;
}

export async function providerOf(server: string, send: typeof fetch = fetch): Promise<ProviderInfo> {
  let response: Response;
  try {
    response = await send(new URL("/auth/oidc", server));
  } catch (err) {
    throw new ManentError(
      Code.Unavailable,
      `cannot reach ${server}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : String(err)}`,
    );
  }
  const body = (await response.json().catch(() => ({}))) as Partial<ProviderInfo> & { error?: { message?: string } };
  if (response.status === 404)
    throw new ManentError(Code.FailedPrecondition, `${server} has no OpenID Connect sign-in: use an API token (--token or MANENT_TOKEN)`);
  if (!response.ok || typeof body.issuer !== "string" || typeof body.client_id !== "string") {
    throw new ManentError(
      Code.Unavailable,
      `${server}: cannot read its sign-in settings (HTTP ${response.status}${body.error?.message ? `: ${body.error.message}` : ""})`,
    );
  }
  return { issuer: body.issuer, client_id: body.client_id, scopes: Array.isArray(body.scopes) ? body.scopes : ["openid"] };
}

async function discover(issuer: string, clientId: string, send: typeof fetch | undefined): Promise<client.Configuration> {
  try {
    // The configuration keeps `send` for every later request to the provider (token, device, revocation).
    return await client.discovery(new URL(issuer), clientId, undefined, client.None(), {
      timeout: 10,
      ...(send && { [client.customFetch]: send }),
      ...(isLoopbackHttpUrl(issuer) && { execute: [client.allowInsecureRequests] }),
    });
  } catch (err) {
    throw new ManentError(Code.Unavailable, `cannot reach the OpenID provider ${issuer}: ${describe(err)}`);
  }
}

/** The scopes the CLI asks for: the server's, plus offline_access so it can refresh its ID token. */
function cliScopes(info: ProviderInfo): string {
  return [...new Set([...info.scopes, "offline_access"])].join(" ");
}

function stored(info: ProviderInfo, tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers): StoredLogin {
  const claims = tokens.claims();
  if (!tokens.id_token || !claims) throw new ManentError(Code.Unauthenticated, "the provider returned no ID token");
  return {
    issuer: info.issuer,
    client_id: info.client_id,
    id_token: tokens.id_token,
    expires_at: claims.exp,
    ...(tokens.refresh_token && { refresh_token: tokens.refresh_token }),
    name: typeof claims.email === "string" ? claims.email : claims.sub,
  };
}

/**
 * The device authorization grant (RFC 8628), for a machine without a browser: prints where to go
 * and the code to type, then waits while the person signs in elsewhere.
 */
export async function deviceLogin(
  server: string,
  print: (line: string) => void,
  transports: LoginTransports = {},
  signal?: AbortSignal,
): Promise<StoredLogin> {
  const info = await providerOf(server, transports.server);
  const config = await discover(info.issuer, info.client_id, transports.provider);
  if (!config.serverMetadata().device_authorization_endpoint) {
    throw new ManentError(
      Code.FailedPrecondition,
      `the OpenID provider ${info.issuer} does not offer the device flow: run manent login without --device`,
    );
  }
  let device: client.DeviceAuthorizationResponse;
  try {
    device = await client.initiateDeviceAuthorization(config, { scope: cliScopes(info) });
  } catch (err) {
    throw new ManentError(Code.Unauthenticated, `the provider refused the device sign-in: ${describe(err)}`);
  }
  print(`To sign in, open ${device.verification_uri} and enter the code ${device.user_code}`);
  if (device.verification_uri_complete) print(`(or open ${device.verification_uri_complete})`);
  print("Waiting for the sign-in to complete…");
  let tokens;
  try {
    tokens = await client.pollDeviceAuthorizationGrant(config, device, undefined, signal ? { signal } : undefined);
  } catch (err) {
    throw new ManentError(Code.Unauthenticated, `sign-in not completed: ${describe(err)}`);
  }
  const login = stored(info, tokens);
  await saveLogin(server, login);
  return login;
}

/**
 * The authorization code flow with PKCE on a loopback redirect (RFC 8252): a one-request HTTP
 * server on 127.0.0.1 receives the provider's redirect; the browser is opened on the sign-in page
 * (or the URL printed, to open by hand).
 */
export async function browserLogin(
  server: string,
  print: (line: string) => void,
  opts: { openBrowser: boolean; transports?: LoginTransports },
): Promise<StoredLogin> {
  const info = await providerOf(server, opts.transports?.server);
  const config = await discover(info.issuer, info.client_id, opts.transports?.provider);
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const callbacks = createServer();
  await new Promise<void>((resolve, reject) => {
    callbacks.once("error", reject);
    callbacks.listen(0, "127.0.0.1", resolve);
  });
  try {
    const redirectUri = `http://127.0.0.1:${(callbacks.address() as AddressInfo).port}/callback`;
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: cliScopes(info),
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    const arrived = new Promise<URL>((resolve) => {
      callbacks.on("request", (req, res) => {
        const at = new URL(req.url ?? "/", redirectUri);
        if (at.pathname !== "/callback") {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8" }).end("manent: sign-in received; you can close this page.\n");
        resolve(at);
      });
    });
    print(`Sign in at ${url.href}`);
    if (opts.openBrowser && !openInBrowser(url.href)) print("(no browser could be opened: open the address above by hand)");
    const callbackUrl = await arrived;
    let tokens;
    try {
      tokens = await client.authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: verifier,
        expectedState: state,
        expectedNonce: nonce,
        idTokenExpected: true,
      });
    } catch (err) {
      throw new ManentError(Code.Unauthenticated, `sign-in refused: ${describe(err)}`);
    }
    const login = stored(info, tokens);
    await saveLogin(server, login);
    return login;
  } finally {
    callbacks.close();
    callbacks.closeAllConnections();
  }
}

function openInBrowser(url: string): boolean {
  const command = process.env.BROWSER || (process.platform === "darwin" ? "open" : "xdg-open");
  try {
    const child = spawn(command, [url], { stdio: "ignore", detached: true });
    child.on("error", () => undefined);
    child.unref();
    return true;
  } catch {
    return false;
  }
}

/**
 * The ID token to send for this server: the stored one, refreshed first when it has expired or is
 * about to (and a refresh token was issued). Undefined when nobody signed in here.
 */
export async function idTokenFor(
  server: string,
  providerTransport: () => Promise<typeof fetch | undefined> = () => Promise.resolve(undefined),
): Promise<string | undefined> {
  const login = await loadLogin(server);
  if (!login) return undefined;
  const fresh = freshIdToken(login);
  if (fresh !== undefined) return fresh;
  if (!login.refresh_token) {
    throw new ManentError(Code.Unauthenticated, `your sign-in to ${server} has expired: run manent login again`);
  }
  const config = await discover(login.issuer, login.client_id, await providerTransport());
  let tokens;
  try {
    tokens = await client.refreshTokenGrant(config, login.refresh_token);
  } catch (err) {
    throw new ManentError(
      Code.Unauthenticated,
      `your sign-in to ${server} could not be renewed (${describe(err)}): run manent login again`,
    );
  }
  const claims = tokens.claims();
  if (!tokens.id_token || !claims) throw new ManentError(Code.Unauthenticated, `the provider renewed no ID token: run manent login again`);
  const renewed: StoredLogin = {
    ...login,
    id_token: tokens.id_token,
    expires_at: claims.exp,
    ...(tokens.refresh_token && { refresh_token: tokens.refresh_token }),
  };
  await saveLogin(server, renewed);
  return renewed.id_token;
}

/** Revokes the refresh token at the provider when it offers revocation; a failure there is reported, never fatal. */
export async function revokeAtProvider(login: StoredLogin, providerTransport?: typeof fetch): Promise<string | undefined> {
  if (!login.refresh_token) return undefined;
  try {
    const config = await discover(login.issuer, login.client_id, providerTransport);
    if (!config.serverMetadata().revocation_endpoint) return "the provider offers no revocation: its session ends when it expires";
    await client.tokenRevocation(config, login.refresh_token, { token_type_hint: "refresh_token" });
    return undefined;
  } catch (err) {
    return `the provider could not revoke the refresh token: ${describe(err)}`;
  }
}

function describe(err: unknown): string {
  if (err instanceof client.ResponseBodyError || err instanceof client.AuthorizationResponseError) {
    return `${err.error}${err.error_description ? `: ${err.error_description}` : ""}`;
  }
  if (err instanceof Error) return `${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ""}`;
  return String(err);
}
