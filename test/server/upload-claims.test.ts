import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ApiClient } from "../../src/cli/api-client.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** Resolves once the deploy waits at its approval (a deploy queued by a killed server has no record until its workflow starts). */
async function waitingAtApproval(api: ApiClient, id: string): Promise<void> {
  for (;;) {
    const d = await api.deploy(id).catch((err: unknown) => {
      if (err instanceof ManentError && err.code === Code.NotFound) return undefined;
      throw err;
    });
    if (d?.rollout?.waiting?.kind === "approval") return;
    if (d)
      assert.ok(!["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status), `deploy ended (${d.status}) before its approval`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The release once it has ended. */
async function waitForRelease(api: ApiClient, id: string) {
  for (;;) {
    const r = await api.release(id);
    if (r.status !== "running") return r;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Issue 20 follow-up, on a real server and Postgres: an upload a submission has claimed is neither
 * deleted (`manent uploads rm`) nor swept before its deploy is recorded, whether the submission is
 * held before its workflow is queued or its server was killed between queueing it and recording it
 * (the workflow waiting, unrecorded, behind another deploy). Retention is set so that nothing else
 * would keep the upload: min_age 0, keep_releases 1.
 */
describe("uploads claimed by a submission whose deploy is not recorded yet", () => {
  let postgres: TestPostgres;
  let ws: Workspace;

  before(async () => {
    postgres = await TestPostgres.start();
    ws = await createWorkspace();
    for (const app of ["shop", "gated", "piped"]) {
      await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
        plugin: "noop",
        targets: ["eu-1", "us-1"].map((h) => ({ host: `${app}-${h}`, labels: { region: h.slice(0, 2) } })),
        params: { state_dir: ws.path("state") },
        ...(app === "gated" && { rollout: { waves: { by: ["region"], between: [{ approval: {} }] } } }),
      });
    }
    // A release that waits for its approval before its only stage deploys anything.
    await ws.write("envconfig/untenanted/piped/pipeline.yml", { stages: [{ environment: "prod", approval: {} }] });
  });
  after(async () => postgres?.stop());

  const databases = new Map<string, string>();
  const dbOf = (config: string) => databases.get(config)!;
  const configFor = async (name: string) => {
    const url = await postgres.createDatabase();
    const file = await ws.write(
      `${name}.yml`,
      manentYml(url, { uploads: { retention: { keep_releases: 1, min_age: 0, sweep_interval: 0 } } }),
    );
    databases.set(file, url);
    return file;
  };
  const upload = async (server: ServerProcess, name: string, content: string) => {
    const file = await ws.write(`files/${name}`, content);
    await server.api.upload("untenanted", sha(content), file, content.length);
    return `upload:${sha(content)}/${name}`;
  };
  const cli = (server: ServerProcess, ...args: string[]) => runCli(["uploads", ...args], { cwd: ws.dir, server: server.url });

  it("a submission held between its claim and queueing its workflow: rm and sweep keep the upload, the deploy succeeds; rm works once it is no longer needed", async () => {
    const config = await configFor("held");
    const server = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_PAUSE_AT: "submit:resolved" } });
    try {
      const content = "held payload\n";
      const source = await upload(server, "held.txt", content);
      const paused = server.logged(/fault point submit:resolved: paused/);
      const submitted = server.api.submit({ descriptor: descriptor("shop", "prod", source, "1.0.0"), descriptor_file: "shop.yml" });
      await paused;

      const rm = await cli(server, "rm", sha(content));
      assert.equal(rm.code, 2, rm.stderr);
      assert.match(
        rm.stderr,
        new RegExp(
          `upload ${sha(content)} is needed by deploy \\S+ of shop/prod version 1\\.0\\.0 \\(being submitted, not recorded yet: try again once it is\\); it is not removed`,
        ),
      );
      const sweep = await cli(server, "sweep", "-o", "json");
      assert.equal(sweep.code, 0, sweep.stderr);
      assert.deepEqual((JSON.parse(sweep.stdout) as { removed: unknown[] }).removed, []);
      const listed = (await server.api.uploads()).uploads.find((u) => u.sha256 === sha(content));
      assert.deepEqual(
        listed?.needed_by.map((n) => [n.application, n.version, n.status, n.reason]),
        [["shop", "1.0.0", "submitting", "in_progress"]],
      );

      server.child.kill("SIGUSR2");
      const { id } = await submitted;
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");

      // Now the last version released there keeps it (keep_releases 1); a later release frees it.
      const kept = await cli(server, "rm", sha(content));
      assert.equal(kept.code, 2, kept.stderr);
      assert.match(
        kept.stderr,
        new RegExp(`needed by deploy ${id} of shop/prod version 1\\.0\\.0 \\(one of the last 1 versions released there`),
      );
      const next = await server.api.submit({
        descriptor: descriptor("shop", "prod", await upload(server, "next.txt", "next payload\n"), "2.0.0"),
        descriptor_file: "shop.yml",
      });
      assert.equal((await server.api.deploy(next.id, 60)).status, "succeeded");
      const removed = await cli(server, "rm", sha(content), "-o", "json");
      assert.equal(removed.code, 0, removed.stderr);
      assert.deepEqual(JSON.parse(removed.stdout), [{ sha256: sha(content), size: content.length, tenant: "untenanted" }]);
    } finally {
      await server.stop();
    }
  });

  it("a deletion that comes while a submission queues its workflow waits for it, then finds the claim", async () => {
    const config = await configFor("serialized");
    const server = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_PAUSE_AT: "submit:claimed" } });
    const db = new pg.Client(dbOf(config));
    await db.connect();
    try {
      const content = "serialized payload\n";
      const source = await upload(server, "serialized.txt", content);
      const paused = server.logged(/fault point submit:claimed: paused/);
      const submitted = server.api.submit({ descriptor: descriptor("shop", "prod", source, "4.0.0"), descriptor_file: "shop.yml" });
      await paused;
      // The submission holds the tenant's upload lock (shared) between its claim and its queueing:
      // the deletion waits for it, seen as an advisory lock not granted.
      let answered = false;
      const rm = cli(server, "rm", sha(content)).finally(() => (answered = true));
      for (;;) {
        assert.equal(answered, false, "the deletion did not wait for the submission");
        const waiting = await db.query("select 1 from pg_locks where locktype = 'advisory' and not granted");
        if (waiting.rowCount) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      server.child.kill("SIGUSR2");
      const { id } = await submitted;
      const refused = await rm;
      assert.equal(refused.code, 2, refused.stderr);
      // Queued (or recorded, even released: the deploy runs on meanwhile) by then: not a submission still checking.
      assert.match(
        refused.stderr,
        new RegExp(
          `upload ${sha(content)} is needed by deploy ${id} of shop/prod version 4\\.0\\.0 \\(((queued|running): it may still fetch it|one of the last 1 versions released there)`,
        ),
      );
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    } finally {
      await db.end();
      await server.stop();
    }
  });

  it("a server killed between queueing the workflow and recording it: the unrecorded queued deploy keeps its upload until it runs", async () => {
    const config = await configFor("killed");
    const ahead = await ws.write("files/ahead.txt", "ahead\n");
    const first = await startServer(config, { cwd: ws.dir });
    const content = "queued payload\n";
    const source = await upload(first, "queued.txt", content);
    // The deploy ahead holds the partition (it waits at its approval), so the one behind stays queued.
    const { id: aheadId } = await first.api.submit({
      descriptor: descriptor("gated", "prod", ahead, "1.0.0"),
      descriptor_file: "gated.yml",
    });
    await waitingAtApproval(first.api, aheadId);
    await first.stop();

    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "submit:after" } });
    await assert.rejects(doomed.api.submit({ descriptor: descriptor("gated", "prod", source, "2.0.0"), descriptor_file: "gated.yml" }));
    assert.equal((await doomed.exited).signal, "SIGKILL");

    const server = await startServer(config, { cwd: ws.dir });
    try {
      // Queued in DBOS, with no record: only the claim says it needs the upload.
      const listed = (await server.api.uploads()).uploads.find((u) => u.sha256 === sha(content));
      assert.equal(listed?.needed_by.length, 1, JSON.stringify(listed));
      const behind = listed.needed_by[0]!;
      // Queued, or dequeued by DBOS already (its recovery at this start puts the deploy ahead back in
      // the queue, the partition then has two to choose from): it then waits for the key held by the
      // deploy ahead (manent.deploy_key_runs), still with no record, as the list below shows.
      assert.deepEqual([behind.application, behind.version, behind.reason], ["gated", "2.0.0", "in_progress"]);
      assert.match(behind.status, /^(queued|running)$/);
      assert.deepEqual(
        (await server.api.list({ application: "gated" })).deploys.map((d) => d.id),
        [aheadId],
      );

      const rm = await cli(server, "rm", sha(content));
      assert.equal(rm.code, 2, rm.stderr);
      assert.match(
        rm.stderr,
        new RegExp(
          `upload ${sha(content)} is needed by deploy ${behind.deploy} of gated/prod version 2\\.0\\.0 \\((queued|running): it may still fetch it\\)`,
        ),
      );
      const sweep = await cli(server, "sweep", "-o", "json");
      assert.equal(sweep.code, 0, sweep.stderr);
      assert.deepEqual((JSON.parse(sweep.stdout) as { removed: unknown[] }).removed, []);

      await waitingAtApproval(server.api, aheadId);
      await server.api.rolloutCommand(aheadId, "approve");
      assert.equal((await server.api.deploy(aheadId, 60)).status, "succeeded");
      await waitingAtApproval(server.api, behind.deploy);
      await server.api.rolloutCommand(behind.deploy, "approve");
      assert.equal((await server.api.deploy(behind.deploy, 60)).status, "succeeded");
    } finally {
      await server.stop();
    }
  });

  it("a running release keeps its upload until its stages have deployed it", async () => {
    const config = await configFor("release");
    const server = await startServer(config, { cwd: ws.dir });
    try {
      const content = "release payload\n";
      const source = await upload(server, "release.txt", content);
      const { id } = await server.api.startRelease({
        descriptor: descriptor("piped", "prod", source, "3.0.0"),
        descriptor_file: "piped.yml",
      });
      for (;;) {
        const r = await server.api.release(id);
        if (r.waiting?.kind === "approval") break;
        assert.equal(r.status, "running", `release ended (${r.status}) before its approval`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // No deploy names the upload yet: only the release does.
      const rm = await cli(server, "rm", sha(content));
      assert.equal(rm.code, 2, rm.stderr);
      assert.match(
        rm.stderr,
        new RegExp(
          `upload ${sha(content)} is needed by release ${id} of piped \\(prod\\) version 3\\.0\\.0 \\(running: its next stages deploy it\\)`,
        ),
      );
      const sweep = await cli(server, "sweep", "-o", "json");
      assert.equal(sweep.code, 0, sweep.stderr);
      assert.deepEqual((JSON.parse(sweep.stdout) as { removed: unknown[] }).removed, []);

      await server.api.releaseCommand(id, "approve");
      assert.equal((await waitForRelease(server.api, id)).status, "succeeded");
    } finally {
      await server.stop();
    }
  });
});
