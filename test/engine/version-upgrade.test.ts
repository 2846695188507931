import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { ReleaseRecord } from "../../src/core/release/release-store.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { until } from "../support/until.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * An upgrade with work in flight: a server of one build (application version "old") leaves a
 * paused canary and a release waiting at a promotion; a server of another build ("new") starts on
 * the same database. Neither is replayed by the new code: both end failed with a record naming the
 * two versions, one warn line each, and a retry of the release goes on from the stage it stopped
 * at, each stage deployed once.
 */
describe("upgrade: in-flight deploys and releases of another build", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let artifact: string;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "upgrade\n");
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase({ empty: true })));
  });
  after(async () => pg?.stop());

  it("settles a paused canary and a waiting release with a clear record; the release's retry deploys each stage once", async () => {
    const env = (app: string, e: string, extra: Record<string, unknown> = {}) =>
      ws.write(`envconfig/untenanted/${app}/${app}/${e}.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-${e}-1` }],
        params: { state_dir: ws.path("state"), journal: ws.path("journal") },
        ...extra,
      });
    await env("canaried", "prod", { rollout: { canary: { steps: [{ set_weight: 25 }, { pause: {} }, { set_weight: 100 }] } } });
    for (const e of ["dev", "staging"]) await env("cart", e);
    await ws.write("envconfig/untenanted/cart/pipeline.yml", {
      stages: [{ environment: "dev" }, { environment: "staging", promotion: "manual" }],
    });

    let server: ServerProcess = await startServer(config, { cwd: ws.dir, env: { MANENT_APPLICATION_VERSION: "old" } });
    let deployId: string;
    let releaseId: string;
    try {
      ({ id: deployId } = await server.api.submit({
        descriptor: descriptor("canaried", "prod", artifact, "2.0.0"),
        descriptor_file: "canaried.yml",
      }));
      ({ id: releaseId } = await server.api.startRelease({
        descriptor: descriptor("cart", "dev", artifact, "3.0.0"),
        descriptor_file: "cart.yml",
      }));
      const api = server.api;
      await until(
        () => api.deploy(deployId),
        (d) => (d.rollout?.waiting ?? null) !== null || (d.status !== "running" && d.status !== "queued"),
        "the canary pauses",
      );
      await until(
        () => api.release(releaseId),
        (r: ReleaseRecord) => r.waiting?.kind === "promotion" || r.status !== "running",
        "the release waits",
      );
    } finally {
      await server.stop();
    }

    server = await startServer(config, { cwd: ws.dir, env: { MANENT_APPLICATION_VERSION: "new" } });
    try {
      const d = await server.api.deploy(deployId, 60);
      assert.equal(d.status, "failed");
      assert.equal(d.error?.code, "aborted");
      assert.match(d.error!.message, /upgraded from old to new while this deploy ran/);

      const r = await until(
        () => server.api.release(releaseId),
        (x: ReleaseRecord) => x.status !== "running",
        "the release ends",
      );
      assert.equal(r.status, "failed");
      assert.equal(r.error?.code, "aborted");
      assert.match(r.error!.message, new RegExp(`upgraded from old to new while this release ran.*manent release retry ${releaseId}`));
      assert.deepEqual(
        r.stages.map((s) => [s.environments.join(","), s.status]),
        [
          ["dev", "succeeded"],
          ["staging", "failed"],
        ],
      );
      assert.equal(r.waiting, null);
      const warns = server
        .logs()
        .split("\n")
        .filter((l: string) => /another manent version ended/.test(l));
      assert.equal(warns.length, 2, warns.join("\n"));
      for (const l of warns) assert.match(l, /"level":40,/, "at warn level (pino 40), not an error");
      assert.doesNotMatch(server.logs(), /manent_json is not available/);

      const retry = await server.api.retryRelease(releaseId);
      assert.equal(retry.from_stage, 2);
      await until(
        () => server.api.release(retry.id),
        (x: ReleaseRecord) => x.waiting?.kind === "promotion" || x.status !== "running",
        "the retry waits",
      );
      await server.api.releaseCommand(retry.id, "promote", "staging");
      const done = await until(
        () => server.api.release(retry.id),
        (x: ReleaseRecord) => x.status !== "running",
        "the retry ends",
      );
      assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    } finally {
      await server.stop();
    }
    const deploys = (await readJournal(ws.path("journal"))).filter(
      (j) => j.call === "deploy" && j.hosts.some((h) => h.startsWith("cart-")),
    );
    assert.deepEqual(deploys.map((j) => j.hosts).sort(), [["cart-dev-1"], ["cart-staging-1"]], "each stage deployed once");
    assert.equal(await readFile(ws.path("state", "cart-staging-1.release"), "utf8"), "3.0.0");
  });
});
