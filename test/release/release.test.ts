import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { ManentError } from "../../src/core/errors.js";
import type { ReleaseRecord } from "../../src/core/release/release-store.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");
/** One API token per person: alice may do anything, bob approves as a release manager, vic only reads, olga is admin of another tenant. */
const people = { alice: "rel-alice-token-0001", bob: "rel-bob-token-0002", vic: "rel-vic-token-0003", olga: "rel-olga-token-0004" };
type Person = keyof typeof people;

/**
 * Releases through environments (issue 21, item 2), through the real CLI and manent-server with the
 * remote-copy plugin copying to local directories: dev → staging (5 s soak, an HTTP analysis) →
 * prod (approval by a release manager, not the submitter); a server SIGKILLed during a soak; a failing
 * staging deploy; a manual promotion; a cancel; who may do what.
 */
describe("releases through environments", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let server: ServerProcess;
  let health: Server;
  let healthUrl: string;
  let healthCalls = 0;
  let artifactBytes: Buffer;

  const api = (who: Person, s = server) => new ApiClient(s.url, people[who]);
  const cli = (who: Person, ...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url, token: people[who] });
  const hostDir = (app: string, env: string) => ws.path("hosts", app, env);

  /** Envconfigs (remote-copy to a local directory per environment) and the pipeline of `app`. */
  const setup = async (app: string, pipeline: object, opts: { failIn?: string; activate?: Record<string, string> } = {}) => {
    for (const env of ["dev", "staging", "prod"]) {
      const activate = opts.failIn === env ? "exit 3" : opts.activate?.[env];
      await ws.write(`envconfig/untenanted/${app}/${app}/${env}.yml`, {
        plugin: "remote-copy",
        targets: [{ host: "web-1" }],
        params: { transport: "local", base: `${hostDir(app, env)}/{host}`, ...(activate !== undefined && { activate }) },
        rollback: { enabled: true },
        max_retries: 0,
        analysis: { checks: { smoke: { http: { url: healthUrl }, interval: "500ms", count: 2 } } },
      });
    }
    await ws.write(`envconfig/untenanted/${app}/pipeline.yml`, pipeline);
    await ws.write(`${app}.yml`, {
      apiVersion: "manent/v1",
      application: app,
      environment: "dev",
      artifact: { type: "file", name: app, version: "1.0.0", source: "dist/app.bin" },
    });
  };
  const startRelease = async (who: Person, app: string): Promise<string> => {
    // As a script would: stdout is a pipe, so the CLI answers the release as JSON.
    const r = await cli(who, "release", "start", "-f", `${app}.yml`, "--no-wait");
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { id: string }).id;
  };
  /** The release once `ok` holds, followed on its event stream (no polling); fails if it ends first. */
  const until = async (id: string, ok: (r: ReleaseRecord) => boolean, what: string, s = server): Promise<ReleaseRecord> => {
    let r = await api("alice", s).release(id);
    if (ok(r) || r.status !== "running") return check(r, ok, what);
    let matched: ReleaseRecord | undefined;
    await api("alice", s).streamEvents(
      `/api/v1/releases/${id}/events`,
      (e) => {
        if (e.type === "release.updated" || e.type === "release.status") r = { ...r, ...(e.data as Partial<ReleaseRecord>) };
        if (ok(r)) matched = r;
        return matched !== undefined || r.status !== "running";
      },
      { after: 0 },
    );
    return check(matched ?? (await api("alice", s).release(id)), ok, what);
  };
  const check = (r: ReleaseRecord, ok: (r: ReleaseRecord) => boolean, what: string): ReleaseRecord => {
    if (!ok(r)) assert.fail(`release ${r.id} ended ${r.status} before: ${what} (${r.error?.message ?? ""})`);
    return r;
  };
  const ended = (r: ReleaseRecord) => r.status !== "running";
  const refusal = async (p: Promise<unknown>): Promise<ManentError> => {
    const err = await p.then(
      () => assert.fail("not refused"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ManentError, String(err));
    return err;
  };
  const deployed = (app: string, env: string) => readFile(`${hostDir(app, env)}/web-1/releases/1.0.0/app.bin`);

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifactBytes = randomBytes(64 * 1024);
    await ws.write("dist/app.bin", artifactBytes.toString("latin1"));
    artifactBytes = await readFile(ws.path("dist/app.bin"));
    health = createServer((_req, res) => {
      healthCalls += 1;
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
    await new Promise<void>((r) => health.listen(0, "127.0.0.1", r));
    healthUrl = `http://127.0.0.1:${(health.address() as AddressInfo).port}/health`;
    const roles = {
      alice: { role: "admin", groups: ["release-managers"] },
      bob: { role: "approver", groups: ["release-managers"] },
      vic: { role: "viewer" },
      olga: { role: "admin", tenant: "other" },
    };
    const tokens = Object.entries(people).map(([name, token]) => ({ name, tenant: "*", sha256: sha(token), ...roles[name as Person] }));
    config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), { auth: { tokens }, plugins: { noop: { artifact_types: ["file"] }, "remote-copy": {} } }),
    );
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await new Promise((r) => health?.close(r));
    await pg?.stop();
  });

  it("goes dev → staging (soak, analysis) → prod (four-eyes approval), the same bytes everywhere", async () => {
    await setup("hello", {
      stages: [
        { environment: "dev" },
        { environment: "staging", soak: "1s", analysis: { checks: ["smoke"] } },
        { environment: "prod", approval: { approvers: { count: 1, from_groups: ["release-managers"], allow_submitter: false } } },
      ],
    });
    // A viewer may not start one (and learns nothing of the pipeline).
    const viewer = await cli("vic", "release", "start", "-f", "hello.yml", "--no-wait");
    assert.equal(viewer.code, 3, viewer.stderr);
    assert.match(viewer.stderr, /vic may not upload artifacts to tenant untenanted/);
    const descriptor = {
      apiVersion: "manent/v1",
      application: "hello",
      environment: "dev",
      artifact: { type: "file", name: "hello", version: "1.0.0", source: ws.path("dist/app.bin") },
    };
    const byApi = await refusal(api("vic").startRelease({ descriptor, descriptor_file: "hello.yml" }));
    assert.equal(byApi.code, 7);
    assert.match(byApi.message, /^vic may not submit in tenant untenanted: needs the submit permission/);

    // Started with the CLI, which follows it until it waits for a person.
    const started = await cli("alice", "release", "start", "-f", "hello.yml", "-o", "text");
    assert.equal(started.code, 0, started.stderr);
    assert.match(
      started.stdout,
      /waiting for approval: manent release approve \S+ \(0 of 1 approval from release-managers; the submitter may not approve\)/,
    );
    const id = /^release (\S+):/m.exec(started.stdout)![1]!;
    const waiting = await api("alice").release(id);
    assert.equal(waiting.waiting?.kind, "approval");
    assert.deepEqual(
      waiting.stages.map((s) => `${s.environments.join(",")} ${s.status}`),
      ["dev succeeded", "staging succeeded", "prod waiting"],
    );
    const staging = waiting.stages[1]!;
    assert.ok(staging.soak_since && staging.soak_until, "the soak is recorded");
    assert.equal(Date.parse(staging.soak_until) - Date.parse(staging.soak_since), 1000);
    assert.ok(Date.parse(staging.finished_at!) >= Date.parse(staging.soak_until), "staging passed only after its soak");
    assert.ok(staging.measurements.length >= 2 && staging.measurements.every((m) => m.verdict === "successful"), "the analysis ran");
    assert.ok(healthCalls >= 2);
    assert.equal(existsSync(hostDir("hello", "prod")), false, "prod untouched before the approval");

    // Four eyes: the submitter and a viewer are refused; a release manager approves.
    const own = await refusal(api("alice").releaseCommand(id, "approve"));
    assert.equal(own.code, 7);
    assert.match(
      own.message,
      /alice may not approve release .*: alice submitted it, and the approval at stage-3:approval refuses the submitter/,
    );
    const byViewer = await refusal(api("vic").releaseCommand(id, "approve"));
    assert.equal(byViewer.code, 7);
    assert.match(byViewer.message, /vic may not approve in tenant untenanted, application hello, environment prod/);
    const approved = await cli("bob", "release", "approve", id);
    assert.equal(approved.code, 0, approved.stderr);

    const watched = await cli("alice", "release", "status", id, "--watch");
    assert.equal(watched.code, 0, watched.stderr + watched.stdout);
    const done = await api("alice").release(id);
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    assert.deepEqual(
      done.stages[2]!.approvals.map((a) => `${a.by} ${a.by_id}`),
      ["bob token:bob"],
    );
    assert.equal(done.sha256, sha(artifactBytes));
    // The bytes in prod are dev's, which are the file uploaded.
    assert.deepEqual(await deployed("hello", "prod"), await deployed("hello", "dev"));
    assert.equal(sha(await deployed("hello", "prod")), sha(artifactBytes));
    for (const s of done.stages) {
      const d = await api("alice").deploy(s.deploys[0]!.deploy_id);
      assert.equal(d.status, "succeeded");
      assert.equal(d.environment, s.environments[0]);
      assert.deepEqual((d.request as { release?: unknown }).release, { id, stage: s.index });
    }

    // Shown in lists and audited.
    const listed = await cli("vic", "release", "list", "-o", "text");
    assert.match(listed.stdout, new RegExp(`${id}\\thello\\t1\\.0\\.0\\t3\\tsucceeded`));
    const audit = await api("alice").audit({ application: "hello" });
    const actions = audit.entries.map((e) => `${e.action} ${e.actor} ${e.outcome}`);
    for (const a of [
      "release_start alice ok",
      "release_start vic permission_denied",
      "release_approve alice permission_denied",
      "release_approve bob ok",
    ])
      assert.ok(actions.includes(a), `${a} in ${actions.join(" | ")}`);
  });

  it("resumes a soak cut by a SIGKILL with the time that remained (the deadline is kept)", async () => {
    await setup("crash", { stages: [{ environment: "dev", soak: "8s" }, { environment: "staging" }] });
    await server.stop();
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "stage-1:soak:after" } });
    server = doomed;
    const id = await startRelease("alice", "crash");
    const exit = await doomed.exited;
    assert.equal(exit.signal, "SIGKILL");
    server = await startServer(config, { cwd: ws.dir });
    // The soak as recorded before the kill (the first such state in the release's history).
    const soak = (await until(id, (r) => r.waiting?.kind === "soak", "the soak")).stages[0]!;
    assert.ok(soak.soak_until);
    const done = await until(id, ended, "the end");
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    // The same recorded deadline, and staging deployed only once it had passed.
    assert.equal(done.stages[0]!.soak_until, soak.soak_until);
    assert.equal(done.stages[0]!.soak_since, soak.soak_since);
    const stagingDeploy = await api("alice").deploy(done.stages[1]!.deploys[0]!.deploy_id);
    assert.ok(Date.parse(stagingDeploy.created_at) >= Date.parse(soak.soak_until!));
    assert.deepEqual(await deployed("crash", "staging"), await deployed("crash", "dev"));
  });

  it("stops at a failing staging deploy and leaves prod untouched", async () => {
    await setup("broken", { stages: [{ environment: "dev" }, { environment: "staging" }, { environment: "prod" }] }, { failIn: "staging" });
    const r = await cli("alice", "release", "start", "-f", "broken.yml", "-o", "text");
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const id = /^release (\S+):/m.exec(r.stdout)![1]!;
    const done = await api("alice").release(id);
    assert.equal(done.status, "failed");
    assert.deepEqual(
      done.stages.map((s) => s.status),
      ["succeeded", "failed", "not_started"],
    );
    assert.match(done.error!.message, /^stage 2 \(staging\): deploy \S+ to staging ended rolled_back: /);
    assert.deepEqual(done.stages[2]!.deploys, []);
    assert.equal(existsSync(hostDir("broken", "prod")), false);
  });

  it("retries a release that failed in staging from staging: dev not deployed again, staging and prod deployed, across a SIGKILL", async () => {
    // Staging's target fails until it is repaired (the marker file exists): a failure from outside the release.
    const repaired = ws.path("again-staging-repaired");
    await setup(
      "again",
      { stages: [{ environment: "dev" }, { environment: "staging", soak: "1s" }, { environment: "prod" }] },
      { activate: { staging: `test -f ${repaired}` } },
    );
    const first = await cli("alice", "release", "start", "-f", "again.yml", "-o", "text");
    assert.equal(first.code, 1, first.stdout + first.stderr);
    const failedId = /^release (\S+):/m.exec(first.stdout)![1]!;
    const failed = await api("alice").release(failedId);
    assert.deepEqual(
      failed.stages.map((s) => s.status),
      ["succeeded", "failed", "not_started"],
    );
    const stagingDeploy = failed.stages[1]!.deploys[0]!.deploy_id;

    // The stage's deploy alone is not retried: it would not be part of the release.
    const alone = await cli("alice", "retry", stagingDeploy);
    assert.equal(alone.code, 2, alone.stdout + alone.stderr);
    assert.match(
      alone.stderr,
      new RegExp(`deploy ${stagingDeploy} is stage 2 of release ${failedId}: retry the release \\(manent release retry ${failedId}\\)`),
    );
    // Who may not start it may not retry it; another tenant's caller does not see it.
    const byViewer = await refusal(api("vic").retryRelease(failedId));
    assert.equal(byViewer.code, 7);
    assert.match(byViewer.message, /vic may not submit in tenant untenanted, application again, environment dev/);
    const byOther = await refusal(api("olga").retryRelease(failedId));
    assert.equal(byOther.code, 5);
    assert.match(byOther.message, new RegExp(`release ${failedId} not found`));

    // Repaired, then retried on a server killed once prod's deploy has started.
    await ws.write("again-staging-repaired", "ok");
    await server.stop();
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "stage-3:deploy:after" } });
    server = doomed;
    const retried = await cli("alice", "release", "retry", failedId, "--no-wait");
    assert.equal(retried.code, 0, retried.stderr);
    const id = (JSON.parse(retried.stdout) as ReleaseRecord).id;
    assert.equal((await doomed.exited).signal, "SIGKILL");
    server = await startServer(config, { cwd: ws.dir });
    const events: { type: string; data: Record<string, unknown> }[] = [];
    await api("alice").streamEvents(
      `/api/v1/releases/${id}/events`,
      (e) => {
        events.push({ type: e.type, data: e.data as Record<string, unknown> });
        return e.type === "release.status" && e.data.status !== "running";
      },
      { after: 0 },
    );
    const done = await api("alice").release(id);
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    assert.equal(done.retry_of, failedId);
    assert.equal(done.sha256, failed.sha256);
    assert.deepEqual(
      done.stages.map((s) => `${s.status} ${s.done_by ?? "-"}`),
      [`succeeded ${failedId}`, "succeeded -", "succeeded -"],
    );
    // Dev is the earlier release's deploy, not a new one; staging and prod are the retry's, each deployed once.
    assert.deepEqual(done.stages[0]!.deploys, failed.stages[0]!.deploys);
    for (const env of ["dev", "staging", "prod"]) {
      const { deploys } = await api("alice").list({ application: "again", environment: env });
      assert.equal(deploys.length, env === "staging" ? 2 : 1, `${env}: ${deploys.map((d) => d.id).join(", ")}`);
    }
    for (const s of done.stages.slice(1)) {
      const d = await api("alice").deploy(s.deploys[0]!.deploy_id);
      assert.equal(d.status, "succeeded");
      assert.deepEqual((d.request as { release?: unknown }).release, { id, stage: s.index });
    }
    assert.deepEqual(await deployed("again", "prod"), await deployed("again", "dev"));
    assert.equal(sha(await deployed("again", "staging")), sha(artifactBytes));

    // Linked both ways: the records, the events, the CLI.
    const original = await api("alice").release(failedId);
    assert.equal(original.status, "failed");
    assert.deepEqual(original.retried_by, [id]);
    const created = events.find((e) => e.type === "release.created");
    assert.equal(created?.data.retry_of, failedId);
    const shown = await cli("alice", "release", "status", id, "-o", "text");
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, new RegExp(`^release ${id}: again 1\\.0\\.0 \\(again\\) succeeded \\(retry of ${failedId}\\)`, "m"));
    assert.match(shown.stdout, new RegExp(`^  1\\. dev: succeeded \\[dev \\S+ succeeded\\] \\(done by release ${failedId}\\)`, "m"));
    const before = await cli("alice", "release", "status", failedId, "-o", "text");
    assert.match(before.stdout, new RegExp(`^retried by ${id}$`, "m"));

    // Only a failed or cancelled release is retried.
    const again = await cli("alice", "release", "retry", id);
    assert.equal(again.code, 2, again.stdout + again.stderr);
    assert.match(again.stderr, new RegExp(`release ${id} is succeeded: only a failed or cancelled release is retried`));
    const audit = await api("alice").audit({ application: "again" });
    const actions = audit.entries.map((e) => `${e.action} ${e.actor} ${e.outcome}`);
    for (const a of [
      "release_retry alice ok",
      "release_retry vic permission_denied",
      "release_retry alice failed_precondition",
      "retry alice failed_precondition",
    ])
      assert.ok(actions.includes(a), `${a} in ${actions.join(" | ")}`);
  });

  it("waits at a manual stage until promoted by hand", async () => {
    await setup("manual", { stages: [{ environment: "dev" }, { environment: "staging", promotion: "manual" }] });
    const r = await cli("alice", "release", "start", "-f", "manual.yml", "-o", "text");
    assert.equal(r.code, 0, r.stderr);
    const id = /^release (\S+):/m.exec(r.stdout)![1]!;
    assert.match(r.stdout, new RegExp(`waiting for promotion: manent release promote ${id} --to staging`));
    assert.equal(existsSync(hostDir("manual", "staging")), false);
    // Not an environment of the stage it waits at, or not its own: refused, nothing sent.
    const wrong = await cli("alice", "release", "promote", id, "--to", "prod");
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /to: prod is not an environment of release/);
    const byViewer = await refusal(api("vic").releaseCommand(id, "promote", "staging"));
    assert.equal(byViewer.code, 7);
    const promoted = await cli("alice", "release", "promote", id, "--to", "staging");
    assert.equal(promoted.code, 0, promoted.stderr);
    const done = await until(id, ended, "the end");
    assert.equal(done.status, "succeeded");
    assert.equal(done.stages[1]!.promoted_by, "alice");
    assert.deepEqual(await deployed("manual", "staging"), await deployed("manual", "dev"));
  });

  it("is cancelled during a soak, and later stages are not started", async () => {
    await setup("stop", { stages: [{ environment: "dev", soak: "10m" }, { environment: "staging" }] });
    const id = await startRelease("alice", "stop");
    await until(id, (r) => r.waiting?.kind === "soak", "the soak");
    const byViewer = await refusal(api("vic").releaseCommand(id, "cancel"));
    assert.equal(byViewer.code, 7);
    const c = await cli("alice", "release", "cancel", id);
    assert.equal(c.code, 0, c.stderr);
    const done = await until(id, ended, "the end");
    assert.equal(done.status, "cancelled");
    assert.deepEqual(
      done.stages.map((s) => s.status),
      ["cancelled", "not_started"],
    );
    assert.match(done.error!.message, /^cancelled by alice during the soak of stage 1 \(dev\)/);
    assert.equal(existsSync(hostDir("stop", "staging")), false);

    // A cancelled release is retried from the stage it was cancelled at: nothing passed, nothing carried over.
    // Sent together, the retries start one release; the others are refused naming it.
    const attempts = await Promise.allSettled([1, 2, 3, 4].map(() => api("alice").retryRelease(id)));
    const started = attempts.flatMap((a) => (a.status === "fulfilled" ? [a.value] : []));
    assert.equal(started.length, 1, JSON.stringify(attempts));
    const retried = started[0]!;
    for (const a of attempts.flatMap((x) => (x.status === "rejected" ? [x.reason as ManentError] : []))) {
      assert.equal(a.code, 9);
      assert.match(a.message, new RegExp(`^release ${id} was already retried by release ${retried.id}: a release is retried once`));
    }
    assert.equal(retried.from_stage, 1);
    const soaking = await until(retried.id, (r) => r.waiting?.kind === "soak", "the retry's soak");
    assert.equal(soaking.retry_of, id);
    assert.equal(soaking.stages[0]!.done_by ?? null, null);
    assert.notDeepEqual(soaking.stages[0]!.deploys, done.stages[0]!.deploys);
    const running = await refusal(api("alice").retryRelease(retried.id));
    assert.equal(running.code, 9);
    assert.match(running.message, /is running: only a failed or cancelled release is retried \(wait for it to end, or cancel it\)/);
    assert.equal((await cli("alice", "release", "cancel", retried.id)).code, 0);
    assert.equal((await until(retried.id, ended, "the retry's end")).status, "cancelled");
    assert.deepEqual((await api("alice").release(id)).retried_by, [retried.id]);
    // Dev was deployed once by the release and once by its one retry.
    assert.equal((await api("alice").list({ application: "stop", environment: "dev" })).deploys.length, 2);
    // A later retry is refused too, the CLI naming the retry; the retry's own retry is the way on.
    const later = await cli("alice", "release", "retry", id);
    assert.equal(later.code, 2, later.stdout + later.stderr);
    assert.match(later.stderr, new RegExp(`release ${id} was already retried by release ${retried.id}`));
    const onward = await api("alice").retryRelease(retried.id);
    assert.equal((await api("alice").release(onward.id)).retry_of, retried.id);
    assert.equal((await cli("alice", "release", "cancel", onward.id)).code, 0);
    assert.equal((await until(onward.id, ended, "the retry's retry's end")).status, "cancelled");
  });

  it("refuses a bad pipeline naming file, field and reason, and records nothing", async () => {
    await setup("badpipe", { stages: [{ environment: "dev", soak: "soon" }] });
    const r = await cli("alice", "release", "start", "-f", "badpipe.yml");
    assert.equal(r.code, 2);
    assert.match(r.stderr, /envconfig\/untenanted\/badpipe\/pipeline\.yml: stages\.0\.soak: "soon" is not a duration/);
    await setup("nocheck", { stages: [{ environment: "dev", analysis: { checks: ["latency"] } }] });
    const n = await cli("alice", "release", "start", "-f", "nocheck.yml");
    assert.equal(n.code, 2);
    assert.match(n.stderr, /pipeline\.yml: stages\.0\.analysis\.checks\.0: no check named "latency" in analysis\.checks of .*dev\.yml/);
    const { releases } = await api("alice").releases({ application: "badpipe" });
    assert.deepEqual(releases, []);
  });
});
