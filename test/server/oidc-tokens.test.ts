import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { decodeJwt, exportJWK, generateKeyPair, importJWK, SignJWT, type JWTPayload } from "jose";
import { ApiClient } from "../../src/cli/api-client.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { deviceFlowTokens, launchChromium } from "../support/browser.js";
import { databaseText } from "../support/database-text.js";
import { defaultUsers, startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const clientSecret = "oidc-client-secret-5f1d2c9e7a";

/**
 * ID tokens as bearer tokens (what `manent login` keeps), against a real OpenID provider
 * (test/support/oidc-provider.ts): real tokens from the device flow approved in Chromium, and
 * forged ones made with jose, each wrong in one way only.
 */
describe("OpenID Connect ID tokens", () => {
  let pg: TestPostgres;
  let databaseUrl: string;
  let ws: Workspace;
  let provider: RunningOidcProvider;
  let server: ServerProcess;
  let chromium: Awaited<ReturnType<typeof launchChromium>>;
  let alice: { idToken: string; refreshToken?: string };
  let bob: { idToken: string };
  let mallory: { idToken: string };
  let artifact: string;

  const as = (token: string) => new ApiClient(server.url, token);
  const refusal = async (token: string): Promise<ManentError> => {
    const err = await as(token)
      .list({})
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof ManentError, "the token was accepted");
    assert.equal(err.code, Code.Unauthenticated, err.message);
    return err;
  };
  /** A token with a real token's claims changed, signed with the provider's own key unless `key` says otherwise. */
  const forge = async (claims: JWTPayload, key = provider.signingKey()) =>
    new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: key.kid }).sign(await importJWK(key.jwk, "RS256"));

  before(async () => {
    pg = await TestPostgres.start();
    databaseUrl = await pg.createDatabase();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "oidc\n");
    await ws.write("envconfig/team-a/shop/shop/test.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }],
      params: { state_dir: ws.path("state") },
    });
    // Mallory signed up at the provider with the boss's address, which the provider never verified.
    provider = await startOidcProvider({
      client: { id: "manent", secret: clientSecret },
      users: [...defaultUsers, { login: "mallory", email: "Boss@example.com", emailVerified: false, name: "Mallory", groups: [] }],
    });
    const config = await ws.write(
      "manent.yml",
      manentYml(databaseUrl, {
        auth: {
          tokens: [],
          grants: [
            { role: "deployer", groups: ["deployers"], tenant: "team-a" },
            { role: "viewer", groups: ["viewers"], tenant: "team-a" },
            { role: "viewer", users: ["erin@example.com"], tenant: "team-a" },
            { role: "admin", users: ["boss@example.com"], tenant: "*" },
            { role: "viewer", users: ["frank"], tenant: "team-a" },
          ],
          oidc: {
            issuer: provider.issuer,
            client_id: "manent",
            client_secret: "env:MANENT_OIDC_CLIENT_SECRET",
            cli_client_id: "manent-cli",
          },
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir, env: { MANENT_OIDC_CLIENT_SECRET: clientSecret } });
    provider.setRedirectUris([`${server.url}/auth/callback`]);
    chromium = await launchChromium();
    alice = await deviceFlowTokens(chromium.browser, provider.issuer, "manent-cli", "alice");
    bob = await deviceFlowTokens(chromium.browser, provider.issuer, "manent-cli", "bob");
    mallory = await deviceFlowTokens(chromium.browser, provider.issuer, "manent-cli", "mallory");
  });
  after(async () => {
    await chromium?.close();
    await server?.stop();
    await provider?.close();
    await pg?.stop();
  });

  it("maps groups to roles: a deployer submits, a viewer reads and is refused on submit (403)", async () => {
    const me = await as(alice.idToken).call<{ id: string; name: string; groups: string[] }>("GET", "/api/v1/whoami");
    assert.deepEqual([me.id, me.name, me.groups], ["user:alice", "alice@example.com", ["deployers"]]);
    const submitted = await as(alice.idToken).submit({ descriptor: { ...descriptor("shop", "test", artifact), tenant: "team-a" } });
    assert.equal((await as(alice.idToken).deploy(submitted.id, 60)).status, "succeeded");

    assert.equal((await as(bob.idToken).deploy(submitted.id)).id, submitted.id);
    const refused = await as(bob.idToken)
      .submit({ descriptor: { ...descriptor("shop", "test", artifact), tenant: "team-a" } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(refused instanceof ManentError);
    assert.equal(refused.code, Code.PermissionDenied, refused.message);
    assert.match(refused.message, /bob@example\.com may not submit/);
  });

  it("grants by e-mail only an address the provider says is verified: an unverified one is refused saying why; grants by subject are unaffected", async () => {
    // The provider's own token says email_verified: false for the address an admin grant names.
    assert.equal(decodeJwt(mallory.idToken).email_verified, false);
    const refused = await refusal(mallory.idToken);
    assert.match(
      refused.message,
      /e-mail address Boss@example\.com of mallory is verified \(email_verified is not true\), and auth\.grants grants by e-mail need a verified address/,
    );
    // Neither a string "true" nor a missing claim is the provider's word.
    const { email_verified: _verified, ...claims } = decodeJwt(mallory.idToken);
    assert.match((await refusal(await forge({ ...claims, email_verified: "true" }))).message, /email_verified is not true/);
    assert.match((await refusal(await forge(claims))).message, /email_verified is not true/);
    // The control: the same token with the address verified is the boss's admin grant.
    const verified = await as(await forge({ ...claims, email_verified: true })).call<{
      id: string;
      name: string;
      grants: { role: string }[];
    }>("GET", "/api/v1/whoami");
    assert.deepEqual([verified.id, verified.name, verified.grants.map((g) => g.role)], ["user:mallory", "Boss@example.com", ["admin"]]);
    // A grant by subject needs no address: frank, whose address is unverified, is a viewer, named by his subject.
    const frank = await as(await forge({ ...claims, sub: "frank", email: "frank@example.com", email_verified: false })).call<{
      name: string;
      email?: string;
      grants: { role: string }[];
    }>("GET", "/api/v1/whoami");
    assert.deepEqual([frank.name, frank.email, frank.grants.map((g) => g.role)], ["frank", undefined, ["viewer"]]);
  });

  it("refuses ID tokens expired, from another issuer, for another audience, unsigned, HMAC'd with the public key or re-signed with another key", async () => {
    const real = decodeJwt(alice.idToken);
    const now = Math.floor(Date.now() / 1000);
    // The control: the same claims signed with the provider's key are accepted, so each refusal below is for its one defect.
    assert.equal((await as(await forge(real)).call<{ id: string }>("GET", "/api/v1/whoami")).id, "user:alice");

    assert.match((await refusal(await forge({ ...real, iat: now - 7200, exp: now - 3600 }))).message, /ID token refused: expired/);
    assert.match(
      (await refusal(await forge({ ...real, iss: "https://login.other.example" }))).message,
      /issued by "https:\/\/login\.other\.example"/,
    );
    assert.match((await refusal(await forge({ ...real, aud: "someone-else" }))).message, /another audience/);

    const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const unsigned = `${b64({ alg: "none", typ: "JWT" })}.${b64(real)}.`;
    assert.match((await refusal(unsigned)).message, /algorithm "none" is not accepted/);

    // HS256 keyed with the provider's public key (what a verifier trusting the header's alg would accept).
    const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = provider.signingKey().jwk;
    const hmac = await new SignJWT(real)
      .setProtectedHeader({ alg: "HS256", kid: provider.signingKey().kid })
      .sign(new TextEncoder().encode(JSON.stringify(publicJwk)));
    assert.match((await refusal(hmac)).message, /algorithm "HS256" is not accepted/);

    // Another key, under the provider's kid and under its own.
    const { privateKey } = await generateKeyPair("RS256", { extractable: true });
    const other = await exportJWK(privateKey);
    assert.match((await refusal(await forge(real, { jwk: other, kid: provider.signingKey().kid }))).message, /signature does not verify/);
    assert.match((await refusal(await forge(real, { jwk: other, kid: "attacker-key" }))).message, /a key the provider does not publish/);
  });

  it("refuses a person whose groups the provider left out (group overage) unless manent.yml grants them by e-mail, saying why", async () => {
    const { groups: _groups, ...real } = decodeJwt(alice.idToken);
    // As Entra ID issues it past 200 groups: no groups claim, a pointer to where they are instead.
    const overage = {
      _claim_names: { groups: "src1" },
      _claim_sources: { src1: { endpoint: "https://graph.example/v1.0/users/dave/getMemberObjects" } },
    };
    // The control: without the pointer, a person with no groups is accepted (with no role).
    assert.deepEqual(
      (await as(await forge({ ...real, sub: "dave", email: "dave@example.com" })).call<{ groups: string[] }>("GET", "/api/v1/whoami"))
        .groups,
      [],
    );
    const dave = await refusal(await forge({ ...real, sub: "dave", email: "dave@example.com", ...overage }));
    assert.match(
      dave.message,
      /left the "groups" claim out of the ID token of dave@example\.com .*Groups assigned to the application.*grant this person by e-mail/,
    );
    assert.match(
      (await refusal(await forge({ ...real, sub: "dave", email: "dave@example.com", hasgroups: true }))).message,
      /left the "groups" claim out/,
    );

    // Erin has a grant of her own: she signs in with it, and no group.
    const erin = as(await forge({ ...real, sub: "erin", email: "erin@example.com", ...overage }));
    assert.deepEqual((await erin.call<{ id: string; groups: string[] }>("GET", "/api/v1/whoami")).groups, []);
    await erin.list({ tenant: "team-a" });
  });

  it("accepts tokens signed with the provider's new key after it rotates, and those of the old key it still publishes", async () => {
    const earlier = decodeJwt(alice.idToken);
    const newKey = await provider.rotateKeys();
    const carol = await deviceFlowTokens(chromium.browser, provider.issuer, "manent-cli", "carol");
    assert.equal(JSON.parse(Buffer.from(carol.idToken.split(".")[0]!, "base64url").toString()).kid, newKey.kid);
    const me = await as(carol.idToken).call<{ id: string; groups: string[] }>("GET", "/api/v1/whoami");
    assert.deepEqual([me.id, me.groups], ["user:carol", ["release-managers", "deployers"]]);
    // Alice's token of the previous key is still good (the key is still published), until it expires.
    assert.equal((await as(alice.idToken).call<{ id: string }>("GET", "/api/v1/whoami")).id, `user:${earlier.sub}`);
  });

  it("writes no ID token, refresh token or client secret to its log, its audit or its database", async () => {
    // A refused token is in the audit too (as a refused sign-in), without the token.
    await refusal(await forge({ ...decodeJwt(alice.idToken), aud: "someone-else" }));
    const db = await databaseText(databaseUrl);
    assert.match(db, /sign_in/, "the refused sign-in is audited");
    const secrets = { "Alice's ID token": alice.idToken, "Bob's ID token": bob.idToken, "the client secret": clientSecret };
    if (alice.refreshToken) Object.assign(secrets, { "Alice's refresh token": alice.refreshToken });
    for (const [what, value] of Object.entries(secrets)) {
      // A JWT's signature alone is what makes it usable: never written anywhere.
      const tail = value.includes(".") ? value.split(".")[2]! : value;
      assert.ok(!db.includes(tail), `${what} is in the database`);
      assert.ok(!server.logs().includes(tail), `${what} is in the server's log`);
    }
  });
});
