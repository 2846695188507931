import { isLoopbackHttpUrl } from "../../core/net/loopback.js";
import * as client from "openid-client";
import { readSecretRef, type OidcConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { IdTokenVerifier, type IdentityClaims } from "./id-token-verifier.js";
import { providerTransport } from "./provider-transport.js";

/** The provider as manent-server sees it once discovered: the web UI's client and the ID token verifier. */
export interface DiscoveredProvider {
  client: client.Configuration;
  verifier: IdTokenVerifier;
  endSessionEndpoint?: string;
}

/**
 * manent-server's relying party (openid-client): reads the provider's discovery document when
 * first needed (and again after a failure, so a provider down at start-up is not fatal), then
 * signs people in with the authorization code flow, PKCE, state and nonce.
 */
export class RelyingParty {
  private discovered: Promise<DiscoveredProvider> | undefined;

  private constructor(
    readonly config: OidcConfig,
    private readonly clientSecret: string,
    /** How the provider is reached: trusting `ca_file` too when given; else Node's fetch. */
    private readonly send: typeof fetch | undefined,
  ) {}

  /** Reads the client secret and `ca_file` now, so a missing one stops the server at start-up naming the field. */
  static async create(config: OidcConfig, file: string, baseDir = process.cwd()): Promise<RelyingParty> {
    const secret = await readSecretRef("auth.oidc.client_secret", config.client_secret).catch((err: unknown) => {
      throw new ManentError(Code.InvalidArgument, `${file}: auth.oidc.client_secret: ${ManentError.from(err).message}`, {
        details: { file, field: "auth.oidc.client_secret" },
      });
    });
    const send = config.ca_file === undefined ? undefined : await providerTransport(config.ca_file, file, baseDir);
    return new RelyingParty(config, secret, send);
  }

  get cliClientId(): string {
    return this.config.cli_client_id ?? this.config.client_id;
  }

  provider(): Promise<DiscoveredProvider> {
    this.discovered ??= this.discover().catch((err: unknown) => {
      this.discovered = undefined;
      throw err;
    });
    return this.discovered;
  }

  private async discover(): Promise<DiscoveredProvider> {
    const { issuer } = this.config;
    let configuration: client.Configuration;
    try {
      configuration = await client.discovery(
        new URL(issuer),
        this.config.client_id,
        undefined,
        client.ClientSecretBasic(this.clientSecret),
        {
          timeout: 10,
          ...(isLoopbackHttpUrl(issuer) && { execute: [client.allowInsecureRequests] }),
          // Kept by the configuration for every later request to the provider (the code exchange).
          ...(this.send && { [client.customFetch]: this.send }),
        },
      );
    } catch (err) {
      throw new ManentError(Code.Unavailable, `cannot read the OpenID provider's discovery document at ${issuer}: ${describe(err)}`);
    }
    const meta = configuration.serverMetadata();
    if (!meta.jwks_uri) throw new ManentError(Code.Unavailable, `the OpenID provider ${issuer} publishes no jwks_uri`);
    const verifier = new IdTokenVerifier({
      issuer: meta.issuer,
      jwksUri: new URL(meta.jwks_uri),
      audiences: [...new Set([this.config.client_id, this.cliClientId])],
      providerAlgorithms: meta.id_token_signing_alg_values_supported,
      groupsClaim: this.config.groups_claim,
      ...(this.send && { fetch: this.send }),
    });
    return { client: configuration, verifier, ...(meta.end_session_endpoint && { endSessionEndpoint: meta.end_session_endpoint }) };
  }

  /** Where to send the browser to sign in. */
  async authorizationUrl(redirectUri: string, checks: { state: string; nonce: string; codeVerifier: string }): Promise<URL> {
    const { client: configuration } = await this.provider();
    return client.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri,
      scope: this.config.scopes.join(" "),
      state: checks.state,
      nonce: checks.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(checks.codeVerifier),
      code_challenge_method: "S256",
    });
  }

  /** Exchanges the callback's code (PKCE, state, nonce checked) and verifies the ID token it brings. */
  async finishSignIn(callbackUrl: URL, checks: { state: string; nonce: string; codeVerifier: string }): Promise<IdentityClaims> {
    const { client: configuration, verifier } = await this.provider();
    let idToken: string | undefined;
    try {
      const tokens = await client.authorizationCodeGrant(configuration, callbackUrl, {
        pkceCodeVerifier: checks.codeVerifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true,
      });
      idToken = tokens.id_token;
    } catch (err) {
      throw new ManentError(Code.Unauthenticated, `sign-in refused: ${describe(err)}`);
    }
    if (!idToken) throw new ManentError(Code.Unauthenticated, "sign-in refused: the provider returned no ID token");
    // openid-client checks the claims; the signature is checked here too, against the provider's keys.
    return verifier.verify(idToken, { nonce: checks.nonce, audience: this.config.client_id });
  }
}

/** An openid-client or network error, without anything the provider echoed that could carry a secret. */
function describe(err: unknown): string {
  if (err instanceof client.AuthorizationResponseError || err instanceof client.ResponseBodyError) {
    return `${err.error}${err.error_description ? `: ${err.error_description}` : ""}`;
  }
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? ` (${err.cause.message})` : "";
    return `${err.message}${cause}`;
  }
  return String(err);
}
