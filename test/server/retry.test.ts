import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { runCli, type ServerProcess } from "../support/server-process.js";
import { TokenServer } from "../support/token-server.js";
import { descriptor, type Workspace } from "../support/workspace.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const tokens = {
  admin: "retry-admin-token-00001",
  viewer: "retry-viewer-token-0002",
  deployer: "retry-deployer-token-03",
  other: "retry-other-tenant-0004",
};

/** What a step of a deploy returned (its output is a JSON string). */
const stepOutput = <T>(d: DeployRecord, name: string): T => JSON.parse(d.steps.find((s) => s.name === name)!.output!.result) as T;

/**
 * `manent retry ID` on a real server and Postgres with the noop plugin keeping its releases in a
 * directory: a deploy fails because a target's release file cannot be written; once the target is
 * repaired, the retry deploys the same bytes with the settings of the first deploy (not the files
 * changed since), linked both ways, audited, and refused where it must be.
 */
describe("manent retry", () => {
  const fx = new TokenServer();
  const { api, request } = fx;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  const shop = (environment: string, source = artifact) => ({ ...descriptor("shop", environment, source), tenant: "team-a" });
  const post = (token: string, path: string) => request(token, "POST", path);
  const envconfig = (environment: string, hosts: string[]) =>
    ws.write(`envconfig/team-a/shop/shop/${environment}.yml`, {
      plugin: "noop",
      targets: hosts.map((host) => ({ host })),
      params: { state_dir: ws.path("state", environment) },
      max_retries: 0,
    });
  /** A target whose release file is a directory: the noop plugin cannot write it, so its deploy fails. */
  const breakTarget = async (environment: string, host: string) => {
    await rm(ws.path("state", environment, `${host}.release`), { force: true });
    await mkdir(ws.path("state", environment, `${host}.release`), { recursive: true });
  };
  const repairTarget = (environment: string, host: string) => rm(ws.path("state", environment, `${host}.release`), { recursive: true });
  const failedDeploy = async (environment: string, source = artifact): Promise<DeployRecord> => {
    const { id } = await api(tokens.admin).submit({ descriptor: shop(environment, source), descriptor_file: "shop.yml" });
    const d = await api(tokens.admin).deploy(id, 120);
    assert.ok(d.status === "failed" || d.status === "rolled_back", `${d.status}: ${d.error?.message}`);
    return d;
  };

  before(async () => {
    ({ ws, server, artifact } = await fx.startWithTokens("the first build\n", [
      { name: "root", tenant: "*", token: tokens.admin },
      { name: "looker", tenant: "team-a", role: "viewer", token: tokens.viewer },
      { name: "dev-ci", tenant: "team-a", role: "deployer", environment: "dev", token: tokens.deployer },
      { name: "bank-ci", tenant: "team-b", role: "deployer", token: tokens.other },
    ]));
    for (const env of ["dev", "qa", "prod"]) await envconfig(env, ["web-1", "web-2"]);
  });
  after(() => fx.stop());

  it("retries a failed deploy with the same bytes and the recorded settings, linked both ways, with the CLI", async () => {
    await breakTarget("dev", "web-2");
    const failed = await failedDeploy("dev");
    const fetched = stepOutput<{ sha256: string }>(failed, "fetch").sha256;
    assert.equal(fetched, sha("the first build\n"));

    // Since then: the envconfig gained a target and the artifact file was rebuilt. A retry keeps what the deploy ran with.
    await envconfig("dev", ["web-1", "web-2", "web-3"]);
    await writeFile(artifact, "a later build\n");
    await repairTarget("dev", "web-2");

    const cli = await runCli(["retry", failed.id, "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.deployer });
    assert.equal(cli.code, 0, cli.stdout + cli.stderr);
    const retryId = /\[([0-9a-f-]{36})\] retry of ([0-9a-f-]{36})/.exec(cli.stdout);
    assert.ok(retryId, cli.stdout);
    assert.equal(retryId[2], failed.id);
    assert.match(cli.stdout, /succeeded\n$/);

    const retry = await api(tokens.admin).deploy(retryId[1]!);
    assert.equal(retry.status, "succeeded");
    assert.equal(retry.retry_of, failed.id);
    assert.equal(retry.submitted_by, "dev-ci");
    assert.equal(stepOutput<{ sha256: string }>(retry, "fetch").sha256, fetched, "the same bytes, from the cache");
    const deployed = retry.targets.filter((t) => t.phase === "deploy");
    assert.deepEqual(
      deployed.map((t) => t.host),
      ["web-1", "web-2"],
      "the targets the first deploy resolved, not today's envconfig",
    );
    assert.ok(
      deployed.every((t) => t.status === "deployed" || t.status === "unchanged"),
      JSON.stringify(deployed),
    );
    for (const host of ["web-1", "web-2"]) assert.equal(await readFile(ws.path("state", "dev", `${host}.release`), "utf8"), "1.0.0");
    assert.deepEqual((await api(tokens.admin).deploy(failed.id)).retried_by, [retry.id]);
    const listed = (await api(tokens.admin).list({ tenant: "team-a", environment: "dev" })).deploys.find((d) => d.id === retry.id);
    assert.equal(listed?.retry_of, failed.id);

    const status = await runCli(["status", failed.id, "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.viewer });
    assert.match(status.stdout, new RegExp(`retried by ${retry.id}\n`));

    const audit = await api(tokens.admin).audit({ action: "retry", outcome: "ok" });
    const entry = audit.entries.find((e) => e.deploy_id === retry.id);
    assert.ok(entry, JSON.stringify(audit.entries));
    assert.equal(entry.actor, "dev-ci");
    assert.equal(entry.message, `retry of deploy ${failed.id}`);
  });

  it("announces the retry in the event stream like a submission, naming the deploy it retries", async () => {
    await breakTarget("qa", "web-1");
    const failed = await failedDeploy("qa");
    const res = await fetch(new URL(`/api/v1/deploys/${failed.id}/retry`, server.url), {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.admin}` },
    });
    assert.equal(res.status, 202);
    const { id } = (await res.json()) as { id: string };
    const events: { type: string; data: Record<string, unknown> }[] = [];
    await api(tokens.admin).streamEvents(
      `/api/v1/deploys/${id}/events`,
      (e) => {
        events.push(e);
        return e.type === "deploy.status" && ["succeeded", "failed", "rolled_back", "cancelled"].includes(e.data.status as string);
      },
      { after: 0 },
    );
    const created = events.find((e) => e.type === "deploy.created");
    assert.equal(created?.data.retry_of, failed.id);
    assert.equal(created?.data.kind, "deploy");
    assert.ok(events.some((e) => e.type === "step.started" && e.data.name === "resolve"));
    // The target is still broken: the retry fails as the first deploy did, and is itself retryable.
    assert.notEqual(events.at(-1)?.data.status, "succeeded");
    await repairTarget("qa", "web-1");
    const again = await api(tokens.admin).retry(id);
    const d = await api(tokens.admin).deploy(again.id, 120);
    assert.equal(d.status, "succeeded", d.error?.message);
    assert.equal(d.retry_of, id);
  });

  it("refuses a deploy that did not fail (412), another tenant's (404), a caller without submit (403), a lost artifact (412)", async () => {
    const { id: ok } = await api(tokens.admin).submit({ descriptor: shop("prod"), descriptor_file: "shop.yml" });
    assert.equal((await api(tokens.admin).deploy(ok, 120)).status, "succeeded");
    const done = await post(tokens.admin, `/api/v1/deploys/${ok}/retry`);
    assert.equal(done.status, 412, done.text);
    assert.equal(done.error?.code, "failed_precondition");
    assert.match(done.error!.message, /is succeeded: only a failed, rolled_back or cancelled deploy is retried/);
    const cli = await runCli(["retry", ok], { cwd: ws.dir, server: server.url, token: tokens.admin });
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /is succeeded/);

    const { id: dry } = await api(tokens.admin).submit({ descriptor: shop("prod"), descriptor_file: "shop.yml", dry_run: true });
    await api(tokens.admin).deploy(dry, 120);
    const dryRetry = await post(tokens.admin, `/api/v1/deploys/${dry}/retry`);
    assert.equal(dryRetry.status, 412, dryRetry.text);
    assert.match(dryRetry.error!.message, /is a dry-run, not a deploy/);

    await breakTarget("prod", "web-2");
    const failed = await failedDeploy("prod");
    const other = await post(tokens.other, `/api/v1/deploys/${failed.id}/retry`);
    assert.equal(other.status, 404, other.text);
    const viewer = await post(tokens.viewer, `/api/v1/deploys/${failed.id}/retry`);
    assert.equal(viewer.status, 403, viewer.text);
    assert.match(viewer.error!.message, /^looker may not submit in tenant team-a.*: needs the submit permission/);
    // A deployer granted only dev cannot even read a prod deploy: not found, as for another tenant.
    const devOnly = await post(tokens.deployer, `/api/v1/deploys/${failed.id}/retry`);
    assert.equal(devOnly.status, 404, devOnly.text);
    const refused = await api(tokens.admin).audit({ action: "retry", outcome: "permission_denied" });
    assert.ok(refused.entries.some((e) => e.actor === "looker"));

    // The artifact is gone from its source and from the server's cache: the retry cannot deploy the same bytes.
    const gone = await ws.write("dist/gone.txt", "an artifact deleted since\n");
    const lost = await failedDeploy("prod", gone);
    await rm(gone);
    await rm(ws.path("work", "artifacts", "team-a", sha("an artifact deleted since\n")), { recursive: true, force: true });
    const missing = await post(tokens.admin, `/api/v1/deploys/${lost.id}/retry`);
    assert.equal(missing.status, 412, missing.text);
    assert.equal(missing.error?.code, "failed_precondition");
    assert.match(
      missing.error!.message,
      new RegExp(
        `deploy ${lost.id} cannot be retried: artifact shop 1\\.0\\.0 \\(sha256 ${sha("an artifact deleted since\n")}\\) can no longer be fetched`,
      ),
    );
    assert.deepEqual((await api(tokens.admin).deploy(lost.id)).retried_by, [], "nothing recorded");
  });
});
