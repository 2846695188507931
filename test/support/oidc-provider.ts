/**
 * A real OpenID Connect provider for the tests and the sign-in tutorial: panva's `oidc-provider`
 * (OpenID Certified), on a loopback port, with its own login page (devInteractions: a login form
 * whose login names the account), the device authorization grant, PKCE, refresh tokens and
 * revocation. Its accounts are static people with a `groups` claim. Its signing keys are ours,
 * so a test can rotate them (`rotateKeys`: a new provider on the same listener, signing with a new key,
 * the old one still published, as a provider does during a rotation). It also mints CI jobs' ID
 * tokens (`mintJobToken`: GitHub Actions' or GitLab CI's claims, for an audience the job asks
 * for), signed by the provider itself as the tokens it issues to people.
 */
import { createServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import Provider, { type Configuration } from "oidc-provider";

export interface OidcUser {
  /** The login typed on the provider's page; also the `sub` claim. */
  login: string;
  email: string;
  /** The provider's `email_verified` claim (default true). */
  emailVerified?: boolean;
  name: string;
  groups: string[];
}

export const defaultUsers: OidcUser[] = [
  { login: "alice", email: "alice@example.com", name: "Alice Deployer", groups: ["deployers"] },
  { login: "bob", email: "bob@example.com", name: "Bob Viewer", groups: ["viewers"] },
  { login: "carol", email: "carol@example.com", name: "Carol Releaser", groups: ["release-managers", "deployers"] },
];

export interface OidcProviderOptions {
  /** Loopback port; 0 for any free one. */
  port?: number;
  users?: OidcUser[];
  /** The web UI's confidential client (manent-server's `auth.oidc.client_id` / `client_secret`). */
  client: { id: string; secret: string; redirectUris?: string[] };
  /** The CLI's public client (`auth.oidc.cli_client_id`): PKCE, a loopback redirect on any port, the device flow. */
  cliClientId?: string;
  /** Lifetime of the ID tokens it issues, in seconds (default 1 h). */
  idTokenTtl?: number;
  /** Served over https with this certificate (an organisation's provider signed by a private CA); default plain http. */
  tls?: { cert: string; key: string };
  /** The audiences CI jobs may ask tokens for (`mintJobToken`); each is a client of the provider, as GitHub's audience is. */
  jobAudiences?: string[];
}

/** A CI job's claims, as GitHub Actions or GitLab CI put them in its ID token (sub, repository, ref, environment…). */
export type JobClaims = { sub: string } & Record<string, string | number | boolean>;

/** GitHub Actions' claims for a job of `repository` on `ref`, deploying to `environment` if given (sub as GitHub makes it). */
export function githubJobClaims(repository: string, ref: string, environment?: string): JobClaims {
  const [owner] = repository.split("/");
  return {
    sub: environment ? `repo:${repository}:environment:${environment}` : `repo:${repository}:ref:${ref}`,
    repository,
    repository_owner: owner!,
    repository_id: "123456789",
    repository_owner_id: "987654",
    ref,
    ref_type: ref.startsWith("refs/tags/") ? "tag" : "branch",
    sha: "f1d2d2f924e986ac86fdf7b36c94bcdf32beec15",
    workflow: "deploy",
    job_workflow_ref: `${repository}/.github/workflows/deploy.yml@${ref}`,
    event_name: "push",
    run_id: "7001",
    run_attempt: "1",
    actor: "octocat",
    runner_environment: "github-hosted",
    ...(environment && { environment }),
  };
}

/** GitLab CI's claims for a job of project `path` on branch `ref`, deploying to `environment` if given. */
export function gitlabJobClaims(path: string, ref: string, environment?: string): JobClaims {
  const namespace = path.slice(0, path.lastIndexOf("/"));
  return {
    sub: `project_path:${path}:ref_type:branch:ref:${ref}`,
    namespace_id: "4242",
    namespace_path: namespace,
    project_id: "31337",
    project_path: path,
    user_login: "gitlab-user",
    pipeline_id: "9001",
    pipeline_source: "push",
    job_id: "9002",
    ref,
    ref_type: "branch",
    ref_protected: "true",
    ...(environment && { environment, environment_protected: "true", deployment_tier: "production" }),
  };
}

export interface SigningKey {
  /** The private JWK (with kid and alg). */
  jwk: JWK;
  kid: string;
}

export interface RunningOidcProvider {
  issuer: string;
  users: OidcUser[];
  /** The key it signs with now (the first of its JWKS). */
  signingKey(): SigningKey;
  /** The grant types of the token requests it granted, in order (e.g. `refresh_token`). */
  grants: string[];
  /** Registers the web UI client's redirect URIs (known once manent-server has its port). */
  setRedirectUris(uris: string[]): void;
  /** An ID token for a CI job with these claims, issued to `audience` (one of `jobAudiences`), signed with the provider's current key. */
  mintJobToken(audience: string, claims: JobClaims): Promise<string>;
  /** Restarts it on the same port signing with a new key; the previous key stays published for tokens already issued. */
  rotateKeys(): Promise<SigningKey>;
  close(): Promise<void>;
}

/** A new RS256 signing key with a random kid. */
export async function newSigningKey(): Promise<SigningKey> {
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = `k-${crypto.randomUUID()}`;
  return { jwk: { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" }, kid };
}

export async function startOidcProvider(opts: OidcProviderOptions): Promise<RunningOidcProvider> {
  const users = opts.users ?? defaultUsers;
  const cliClientId = opts.cliClientId ?? "manent-cli";
  // Listening first gives the port, hence the issuer URL the provider must know at construction.
  const http: Server = opts.tls ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }) : createServer();
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(opts.port ?? 0, "127.0.0.1", resolve);
  });
  const port = (http.address() as AddressInfo).port;
  const issuer = `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`;
  let keys: SigningKey[] = [await newSigningKey()];
  let redirectUris = opts.client.redirectUris ?? ["http://127.0.0.1/auth/callback"];
  const cookieKeys = [crypto.randomUUID(), crypto.randomUUID()];

  const configuration = (): Configuration => ({
    clients: [
      {
        client_id: opts.client.id,
        client_secret: opts.client.secret,
        redirect_uris: redirectUris,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
      {
        client_id: cliClientId,
        application_type: "native",
        // RFC 8252: a native client's loopback redirect matches on any port.
        redirect_uris: ["http://127.0.0.1/callback"],
        grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      },
      // A CI job's audience: the provider issues it ID tokens only (mintJobToken), as GitHub Actions does for any audience asked for.
      ...(opts.jobAudiences ?? []).map((audience) => ({
        client_id: audience,
        redirect_uris: ["http://127.0.0.1/unused"],
        grant_types: ["authorization_code"],
        response_types: ["code" as const],
        token_endpoint_auth_method: "none" as const,
      })),
    ],
    jwks: { keys: keys.map((k) => k.jwk) },
    cookies: { keys: cookieKeys },
    scopes: ["openid", "offline_access", "email", "profile", "groups"],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"], groups: ["groups"] },
    // Put the claims in the ID token itself (manent reads them there, not from userinfo).
    conformIdTokenClaims: false,
    findAccount: (_ctx, id) => {
      const user = users.find((u) => u.login === id);
      if (!user) return undefined;
      return {
        accountId: id,
        claims: () => ({ sub: id, email: user.email, email_verified: user.emailVerified ?? true, name: user.name, groups: user.groups }),
      };
    },
    // Both clients are the organisation's own: no consent page (as with most company providers).
    loadExistingGrant: async (ctx) => {
      const accountId = ctx.oidc.session!.accountId!;
      const clientId = ctx.oidc.client!.clientId;
      const existing = ctx.oidc.session!.grantIdFor(clientId);
      if (existing) {
        const found = await ctx.oidc.provider.Grant.find(existing);
        if (found) return found;
      }
      const grant = new ctx.oidc.provider.Grant({ accountId, clientId });
      grant.addOIDCScope("openid offline_access email profile groups");
      grant.addOIDCClaims(["email", "email_verified", "name", "groups"]);
      await grant.save();
      return grant;
    },
    // A refresh token for every client allowed the grant (the CLI refreshes its ID token with it).
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    features: {
      devInteractions: { enabled: true },
      deviceFlow: { enabled: true },
      revocation: { enabled: true },
      rpInitiatedLogout: { enabled: true },
    },
    ttl: {
      IdToken: opts.idTokenTtl ?? 3600,
      AccessToken: 3600,
      AuthorizationCode: 60,
      DeviceCode: 600,
      Grant: 86_400,
      Interaction: 600,
      RefreshToken: 86_400,
      Session: 86_400,
    },
  });

  const grants: string[] = [];
  let current: Provider | undefined;
  const mount = (): void => {
    const provider = new Provider(issuer, configuration());
    current = provider;
    provider.on("grant.success", (ctx) => grants.push(String(ctx.oidc.params?.grant_type)));
    // Its own "Sign-in" page is a dev page that names the account by its login; quiet its warnings.
    provider.on("server_error", (_ctx, err) => process.stderr.write(`oidc-provider: ${String(err)}\n`));
    http.removeAllListeners("request");
    http.on("request", provider.callback());
  };
  mount();

  const close = (server: Server): Promise<void> =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });

  return {
    issuer,
    users,
    grants,
    signingKey: () => keys[0]!,
    setRedirectUris(uris) {
      // A new provider on the same listener (its clients are fixed at construction); keys unchanged.
      redirectUris = uris;
      mount();
    },
    async mintJobToken(audience, claims) {
      const provider = current!;
      const client = await provider.Client.find(audience);
      if (!client) throw new Error(`${audience} is not one of the provider's jobAudiences`);
      // The provider's own IdToken: its issuer, audience (the client), lifetime (ttl.IdToken) and signing key.
      const token = new provider.IdToken({ sub: claims.sub }, { client });
      for (const [name, value] of Object.entries(claims)) token.set(name, value);
      return token.issue({ use: "idtoken" });
    },
    async rotateKeys() {
      keys = [await newSigningKey(), keys[0]!];
      // A new provider instance (its keystore is fixed at construction) on the same listener. Not a new
      // listener: closing it cut the keep-alive sockets clients still pooled, and their next fetch failed.
      mount();
      return keys[0]!;
    },
    close: () => close(http),
  };
}
