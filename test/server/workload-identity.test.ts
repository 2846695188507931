import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { decodeJwt, importJWK, SignJWT, type JWTPayload } from "jose";
import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { deployReaching } from "../support/deploy-wait.js";
import { githubJobClaims, gitlabJobClaims, startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const audience = "https://manent.test";
const adminToken = "workload-test-admin-token-7c1e";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * CI jobs calling the API with their own ID token (auth.workload_identities), through the real
 * server, its HTTP API and the CLI, against two real OpenID providers (test/support/oidc-provider.ts)
 * minting GitHub Actions- and GitLab CI-shaped tokens: accepted within an entry's scope, refused
 * outside it, refused when no entry matches (naming what did not), for another audience, from
 * another issuer, expired or unsigned, and across a rotation of the issuer's keys.
 */
describe("CI workload identity", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let github: RunningOidcProvider;
  let gitlab: RunningOidcProvider;
  let stranger: RunningOidcProvider;
  let server: ServerProcess;
  let artifact: string;

  const as = (token: string) => new ApiClient(server.url, token);
  const admin = () => new ApiClient(server.url, adminToken);
  const refusal = async (p: Promise<unknown>): Promise<ManentError> => {
    const err = await p.then(
      () => assert.fail("not refused"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ManentError, String(err));
    return err;
  };
  const githubJob = (repository: string, ref: string, environment?: string, aud = audience) =>
    github.mintJobToken(aud, githubJobClaims(repository, ref, environment));
  /** A token with these claims signed with GitHub's provider's current key (one defect at a time). */
  const forge = async (claims: JWTPayload, alg = "RS256") => {
    const key = github.signingKey();
    return new SignJWT(claims).setProtectedHeader({ alg, kid: key.kid }).sign(await importJWK(key.jwk, "RS256"));
  };
  const deployTo = (application: string, environment: string, tenant = "team-a") => ({
    descriptor: { ...descriptor(application, environment, artifact), tenant },
  });

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "workload\n");
    for (const [tenant, app, env] of [
      ["team-a", "shop", "prod"],
      ["team-a", "shop", "dev"],
      ["team-a", "cart", "prod"],
      ["team-b", "shop", "prod"],
    ] as const) {
      await ws.write(`envconfig/${tenant}/${app}/${app}/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-1` }],
        params: { state_dir: ws.path(`state-${tenant}-${env}`) },
        rollout: {
          canary: {
            steps: [{ set_weight: 10 }, { approval: { approvers: { count: 1, allow_submitter: false } } }, { set_weight: 100 }],
          },
        },
        rollback: { enabled: true },
      });
    }
    github = await startOidcProvider({ client: { id: "unused", secret: "unused-secret" }, jobAudiences: [audience, "https://other.test"] });
    gitlab = await startOidcProvider({ client: { id: "unused", secret: "unused-secret" }, jobAudiences: [audience] });
    stranger = await startOidcProvider({ client: { id: "unused", secret: "unused-secret" }, jobAudiences: [audience] });
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: {
          tokens: [{ name: "admin", tenant: "*", sha256: sha(adminToken) }],
          workload_identities: [
            {
              name: "github-shop-prod",
              issuer: github.issuer,
              audience,
              claims: { repository: "acme/shop", environment: "prod" },
              role: "deployer",
              tenant: "team-a",
              application: "shop",
              environment: "prod",
            },
            {
              name: "github-shop-dev",
              issuer: github.issuer,
              audience,
              // A job that names no GitHub environment: its sub names the ref (a job with one names the environment instead).
              claims: { sub: ["repo:acme/shop:ref:refs/heads/*", "repo:acme/shop:ref:refs/tags/v*"] },
              role: "deployer",
              tenant: "team-a",
              application: "shop",
              environment: "dev",
            },
            {
              name: "github-shop-approve",
              issuer: github.issuer,
              audience,
              claims: { repository: "acme/shop", workflow: "approve" },
              role: "approver",
              tenant: "team-a",
              application: "shop",
            },
            {
              name: "github-release-bot",
              issuer: github.issuer,
              audience,
              claims: { sub: "repo:acme/release-bot:ref:refs/heads/main" },
              role: "approver",
              tenant: "team-a",
            },
            {
              name: "gitlab-shop",
              issuer: gitlab.issuer,
              audience,
              claims: { project_path: "group/shop", ref: "main", ref_protected: "true" },
              role: "deployer",
              tenant: "team-b",
              application: "shop",
            },
          ],
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await github?.close();
    await gitlab?.close();
    await stranger?.close();
    await pg?.stop();
  });

  it("takes a GitHub job for workload:<issuer>#<sub> with its entry's role (whoami, CLI), deploys within its scope, and the audit log names it", async () => {
    const token = await githubJob("acme/shop", "refs/heads/main", "prod");
    const id = `workload:${github.issuer}#repo:acme/shop:environment:prod`;
    const me = await runCli(["auth", "whoami", "-o", "json"], { cwd: ws.dir, server: server.url, token });
    assert.equal(me.code, 0, me.stderr);
    assert.deepEqual(JSON.parse(me.stdout), {
      kind: "workload",
      id,
      name: "repo:acme/shop:environment:prod",
      groups: [],
      grants: [{ role: "deployer", scope: { tenant: "team-a", application: "shop", environment: "prod" } }],
    });
    const text = await runCli(["auth", "whoami", "-o", "text"], { cwd: ws.dir, server: server.url, token });
    assert.match(text.stdout, new RegExp(`^repo:acme/shop:environment:prod \\(${id.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}\\)\n`));

    const submitted = await as(token).submit(deployTo("shop", "prod"));
    const waiting = await deployReaching(as(token), submitted.id, (d) => d.rollout?.waiting?.kind === "approval", "waiting", 30_000);
    assert.equal(waiting.submitted_by, "repo:acme/shop:environment:prod");
    const entries = (await admin().audit({ deploy_id: submitted.id })).entries;
    const submit = entries.find((e) => e.action === "submit");
    assert.ok(submit, JSON.stringify(entries));
    assert.deepEqual(
      [submit.actor, submit.actor_kind, submit.actor_id, submit.outcome],
      ["repo:acme/shop:environment:prod", "workload", id, "ok"],
    );
    // The job's deployer role may not approve its own deploy (nor anyone's): only an approver entry does.
    const own = await refusal(as(token).rolloutCommand(submitted.id, "approve"));
    assert.equal(own.code, Code.PermissionDenied, own.message);
    assert.match(own.message, /repo:acme\/shop:environment:prod may not approve in tenant team-a, application shop, environment prod/);
    // The release bot, granted approver explicitly, approves it: a different principal from the submitter.
    const bot = await githubJob("acme/release-bot", "refs/heads/main");
    await as(bot).rolloutCommand(submitted.id, "approve");
    const done = await deployReaching(as(token), submitted.id, (d) => d.status === "succeeded", "succeeded", 30_000);
    assert.deepEqual(
      done.rollout?.approvals?.map((a) => [a.by, a.by_id]),
      [["repo:acme/release-bot:ref:refs/heads/main", `workload:${github.issuer}#repo:acme/release-bot:ref:refs/heads/main`]],
    );
  });

  it("refuses a job outside its entry's scope: another environment, application or tenant, and an action its role lacks (403)", async () => {
    const prod = await githubJob("acme/shop", "refs/heads/main", "prod");
    for (const [app, env, tenant] of [
      ["shop", "dev", "team-a"],
      ["cart", "prod", "team-a"],
      ["shop", "prod", "team-b"],
    ] as const) {
      const err = await refusal(as(prod).submit(deployTo(app, env, tenant)));
      assert.equal(err.code, Code.PermissionDenied, err.message);
      assert.match(err.message, new RegExp(`may not submit in tenant ${tenant}, application ${app}, environment ${env}`));
      assert.match(err.message, /its role deployer has it only in tenant team-a, application shop, environment prod/);
    }
    // A job on a branch is the dev entry's (the same repository, another claim set): dev only.
    const branch = await githubJob("acme/shop", "refs/heads/feature-x");
    const me = await as(branch).whoami();
    assert.deepEqual(me.grants, [{ role: "deployer", scope: { tenant: "team-a", application: "shop", environment: "dev" } }]);
    assert.equal((await refusal(as(branch).submit(deployTo("shop", "prod")))).code, Code.PermissionDenied);
    // The release bot approves but may not deploy.
    const bot = await githubJob("acme/release-bot", "refs/heads/main");
    const err = await refusal(as(bot).submit(deployTo("shop", "dev")));
    assert.match(err.message, /may not submit .*needs the submit permission \(role deployer or admin\)/);
  });

  it("takes a GitLab job by its project, ref and protection, and refuses the same project on an unprotected ref", async () => {
    const token = await gitlab.mintJobToken(audience, gitlabJobClaims("group/shop", "main", "production"));
    const me = await as(token).whoami();
    assert.deepEqual(
      [me.kind, me.id, me.grants],
      [
        "workload",
        `workload:${gitlab.issuer}#project_path:group/shop:ref_type:branch:ref:main`,
        [{ role: "deployer", scope: { tenant: "team-b", application: "shop", environment: "*" } }],
      ],
    );
    const submitted = await as(token).submit(deployTo("shop", "prod", "team-b"));
    assert.equal((await as(token).deploy(submitted.id)).tenant, "team-b");
    const unprotected = await gitlab.mintJobToken(audience, { ...gitlabJobClaims("group/shop", "main"), ref_protected: "false" });
    const err = await refusal(as(unprotected).whoami());
    assert.equal(err.code, Code.Unauthenticated, err.message);
    assert.match(err.message, /matches no auth\.workload_identities entry \(gitlab-shop: claim ref_protected is "false", not true\)/);
  });

  it("refuses a token no entry matches, naming each entry's first claim that differs and never echoing the token (401)", async () => {
    const token = await githubJob("acme/other", "refs/heads/main", "prod");
    const err = await refusal(as(token).whoami());
    assert.equal(err.code, Code.Unauthenticated);
    assert.match(
      err.message,
      /CI job's ID token refused: "repo:acme\/other:environment:prod" of http:\/\/127\.0\.0\.1:\d+ matches no auth\.workload_identities entry \(github-shop-prod: claim repository is "acme\/other", not acme\/shop; github-shop-dev: claim sub is "repo:acme\/other:environment:prod", not one of repo:acme\/shop:ref:refs\/heads\/\*, repo:acme\/shop:ref:refs\/tags\/v\*; github-shop-approve: claim repository is "acme\/other", not acme\/shop; github-release-bot: claim sub is "repo:acme\/other:environment:prod", not repo:acme\/release-bot:ref:refs\/heads\/main\)/,
    );
    assert.ok(!err.message.includes(token.split(".")[1]!), "the refusal echoes the token");
    // Through the CLI: exit code of a refused credential, the reason on stderr.
    const cli = await runCli(["auth", "whoami"], { cwd: ws.dir, server: server.url, token });
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /matches no auth\.workload_identities entry/);
    assert.ok(!cli.stderr.includes(token.split(".")[2]!));
    // Nor in the server's log (the access line of each refused request included).
    assert.ok(!server.logs().includes(token.split(".")[2]!), "the server logged the token");
    // A claim missing is said so: a job with no environment matches only the ref entry.
    const missing = await forge({ ...decodeJwt(token), repository: "acme/shop", environment: undefined, ref: "main" });
    assert.match((await refusal(as(missing).whoami())).message, /github-shop-prod: claim environment is missing \(wants prod\)/);
  });

  it("refuses a token for another audience, from an untrusted issuer, expired, unsigned or HMAC'd (401)", async () => {
    const other = await githubJob("acme/shop", "refs/heads/main", "prod", "https://other.test");
    assert.match(
      (await refusal(as(other).whoami())).message,
      /issued for audience "https:\/\/other\.test", and auth\.workload_identities trusts http:\/\/127\.0\.0\.1:\d+ for https:\/\/manent\.test only/,
    );
    const strange = await stranger.mintJobToken(audience, githubJobClaims("acme/shop", "refs/heads/main", "prod"));
    const err = await refusal(as(strange).whoami());
    assert.equal(err.code, Code.Unauthenticated);
    assert.match(err.message, new RegExp(`issued by "${stranger.issuer}", which no auth.workload_identities entry trusts`));

    const real = decodeJwt(await githubJob("acme/shop", "refs/heads/main", "prod"));
    // The control: the same claims signed with the issuer's key are accepted, so each refusal is for its one defect.
    assert.equal((await as(await forge(real)).whoami()).kind, "workload");
    const now = Math.floor(Date.now() / 1000);
    assert.match((await refusal(as(await forge({ ...real, iat: now - 7200, exp: now - 3600 })).whoami())).message, /refused: expired/);
    assert.match((await refusal(as(await forge({ ...real, nbf: now + 3600 })).whoami())).message, /refused: claim nbf invalid/);
    const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
    assert.match((await refusal(as(`${b64({ alg: "none" })}.${b64(real)}.`).whoami())).message, /algorithm "none" is not accepted/);
    const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = github.signingKey().jwk;
    const hmac = await new SignJWT(real)
      .setProtectedHeader({ alg: "HS256", kid: github.signingKey().kid })
      .sign(new TextEncoder().encode(JSON.stringify(publicJwk)));
    assert.match((await refusal(as(hmac).whoami())).message, /algorithm "HS256" is not accepted/);
  });

  it("follows a rotation of the issuer's keys: a token signed with the new key is accepted, one with the old key still is while it is published", async () => {
    const before = await githubJob("acme/shop", "refs/heads/main", "prod");
    assert.equal((await as(before).whoami()).kind, "workload");
    const key = await github.rotateKeys();
    const after = await githubJob("acme/shop", "refs/heads/main", "prod");
    assert.notEqual(
      (JSON.parse(Buffer.from(after.split(".")[0]!, "base64url").toString()) as { kid: string }).kid,
      (JSON.parse(Buffer.from(before.split(".")[0]!, "base64url").toString()) as { kid: string }).kid,
    );
    assert.equal(JSON.parse(Buffer.from(after.split(".")[0]!, "base64url").toString()).kid, key.kid);
    assert.equal((await as(after).whoami()).id, `workload:${github.issuer}#repo:acme/shop:environment:prod`);
    assert.equal((await as(before).whoami()).kind, "workload");
  });

  it("counts a job as the submitter of its own deploy: granted approver by a second entry, it may still not approve it (allow_submitter: false)", async () => {
    const deploying = await githubJob("acme/shop", "refs/heads/main", "prod");
    const submitted = await as(deploying).submit(deployTo("shop", "prod"));
    await deployReaching(as(deploying), submitted.id, (d) => d.rollout?.waiting?.kind === "approval", "waiting", 30_000);
    // The same repository and environment, another workflow: the same subject, so the same principal, with both entries' roles.
    const approving = await github.mintJobToken(audience, {
      ...githubJobClaims("acme/shop", "refs/heads/main", "prod"),
      workflow: "approve",
    });
    const me = await as(approving).whoami();
    assert.deepEqual(
      [me.id, me.grants.map((g) => g.role)],
      [`workload:${github.issuer}#repo:acme/shop:environment:prod`, ["deployer", "approver"]],
    );
    const err = await refusal(as(approving).rolloutCommand(submitted.id, "approve"));
    assert.equal(err.code, Code.PermissionDenied, err.message);
    assert.match(err.message, /repo:acme\/shop:environment:prod submitted it, and the approval at .* refuses the submitter/);
    await admin().rolloutCommand(submitted.id, "abort");
    const aborted: DeployRecord = await deployReaching(admin(), submitted.id, (d) => d.status !== "running", "ended", 30_000);
    assert.notEqual(aborted.status, "succeeded");
  });

  it("refuses to start with an entry that would trust any repository on its issuer, naming file, field and reason", async () => {
    const bad = await ws.write(
      "unsafe.yml",
      manentYml(undefined, {
        auth: {
          workload_identities: [
            {
              name: "anyone",
              issuer: "https://token.actions.githubusercontent.com",
              audience,
              claims: { sub: "*" },
              role: "deployer",
              tenant: "team-a",
            },
          ],
        },
      }),
    );
    const refused = await startServer(bad, { cwd: ws.dir }).then(
      () => assert.fail("the server started"),
      (err: Error) => err.message,
    );
    assert.match(refused, /unsafe\.yml: auth\.workload_identities\.0\.claims: unsafe: no claim pins whose job it is/);
  });
});

/**
 * One provider for people (auth.oidc) and CI jobs: told apart by the audience, so a person's ID
 * token is never taken for a job's, nor a job's for a person's.
 */
describe("CI workload identity beside sign-in at the same issuer", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let provider: RunningOidcProvider;
  let server: ServerProcess;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    provider = await startOidcProvider({ client: { id: "manent", secret: "same-issuer-secret" }, jobAudiences: [audience] });
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: {
          grants: [{ role: "viewer", users: ["repo:acme/shop:environment:prod"], tenant: "team-a" }],
          oidc: { issuer: provider.issuer, client_id: "manent", client_secret: "env:OIDC_SECRET", cli_client_id: "manent-cli" },
          workload_identities: [
            { name: "shop", issuer: provider.issuer, audience, claims: { repository: "acme/shop" }, role: "deployer", tenant: "team-a" },
          ],
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir, env: { OIDC_SECRET: "same-issuer-secret" } });
  });
  after(async () => {
    await server?.stop();
    await provider?.close();
    await pg?.stop();
  });

  it("takes a token for the jobs' audience as a job, and one for the CLI's client, with the same subject, as a person", async () => {
    const claims = githubJobClaims("acme/shop", "refs/heads/main", "prod");
    const job = await new ApiClient(server.url, await provider.mintJobToken(audience, claims)).whoami();
    assert.deepEqual(
      [job.kind, job.id, job.grants.map((g) => g.role)],
      ["workload", `workload:${provider.issuer}#${claims.sub}`, ["deployer"]],
    );
    // The same claims issued to the CLI's client (as `manent login` would get): a person, with auth.grants' role only.
    const key = provider.signingKey();
    const now = Math.floor(Date.now() / 1000);
    const person = await new SignJWT({ ...claims, iss: provider.issuer, aud: "manent-cli", iat: now, exp: now + 300 })
      .setProtectedHeader({ alg: "RS256", kid: key.kid })
      .sign(await importJWK(key.jwk, "RS256"));
    const me = await new ApiClient(server.url, person).whoami();
    assert.deepEqual([me.kind, me.id, me.grants.map((g) => g.role)], ["user", `user:${claims.sub}`, ["viewer"]]);
  });
});
