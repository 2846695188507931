import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { Overview } from "../../src/core/environments/overview.js";
import type { ReleaseRecord } from "../../src/core/release/release-store.js";
import { collect } from "../support/event-stream.js";
import { runCli, type ServerProcess } from "../support/server-process.js";
import { TokenServer } from "../support/token-server.js";
import { descriptor, type Workspace } from "../support/workspace.js";

const tokens = {
  admin: "overview-admin-token-01",
  teamA: "overview-team-a-viewer2",
  teamB: "overview-team-b-deploy3",
  cDev: "overview-team-c-dev-only4",
};

/**
 * The overview on a real server: applications by environment, each cell the release live there,
 * the last deploy when it did not succeed and a rollout in progress; only what the caller may read.
 */
describe("overview: what runs where", () => {
  const fx = new TokenServer();
  const { api } = fx;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;
  const envconfig = (tenant: string, app: string, env: string, extra: Record<string, unknown> = {}) =>
    ws.write(`envconfig/${tenant}/${app}/${app}/${env}.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-${env}-1` }, { host: `${app}-${env}-2` }],
      params: { state_dir: ws.path("state"), ...(extra.params as object) },
      ...(extra.rollout !== undefined && { rollout: extra.rollout }),
    });
  const deploy = async (token: string, tenant: string, app: string, env: string, version: string) => {
    const { id } = await api(token).submit({
      descriptor: { ...descriptor(app, env, artifact, version), tenant },
      descriptor_file: `${app}.yml`,
    });
    return id;
  };
  const ended = async (token: string, id: string) => (await api(token).deploy(id, 60)).status;
  let failedStaging = "";
  let canary = "";

  before(async () => {
    ({ ws, server, artifact } = await fx.startWithTokens("overview\n", [
      { name: "root", tenant: "*", token: tokens.admin },
      { name: "looker", tenant: "team-a", role: "viewer", token: tokens.teamA },
      { name: "bank-ci", tenant: "team-b", role: "deployer", token: tokens.teamB },
      { name: "c-dev", tenant: "team-c", role: "viewer", environment: "dev", token: tokens.cDev },
    ]));
    // Environments first deployed in the order of a release path: the overview's columns follow it.
    for (const env of ["dev", "staging", "prod"]) {
      await envconfig("team-a", "shop", env);
      assert.equal(await ended(tokens.admin, await deploy(tokens.admin, "team-a", "shop", env, "1.0.0")), "succeeded");
    }
    assert.equal(await ended(tokens.admin, await deploy(tokens.admin, "team-a", "shop", "dev", "1.1.0")), "succeeded");
    await envconfig("team-a", "shop", "staging", { params: { fail_hosts: "shop-staging-2", fail_mode: "permanent" } });
    failedStaging = await deploy(tokens.admin, "team-a", "shop", "staging", "1.1.0");
    assert.notEqual(await ended(tokens.admin, failedStaging), "succeeded");
    await envconfig("team-a", "shop", "prod", {
      rollout: { canary: { steps: [{ set_weight: 25 }, { pause: {} }, { set_weight: 100 }] } },
    });
    const stream = collect(server.url, tokens.admin, "/api/v1/events");
    await stream.opened;
    canary = await deploy(tokens.admin, "team-a", "shop", "prod", "1.1.0");
    await envconfig("team-b", "bank", "dev");
    assert.equal(await ended(tokens.teamB, await deploy(tokens.teamB, "team-b", "bank", "dev", "2.0.0")), "succeeded");
    // The canary waits at its pause (its state is recorded before the event is sent).
    await stream.waitFor((e) => e.deploy_id === canary && e.type === "gate.waiting");
    await stream.stop();
  });

  after(() => fx.stop());

  it("shows each application's artifact by environment: live release, a failed last deploy, a rollout in progress", async () => {
    const o: Overview = await api(tokens.admin).overview({});
    assert.deepEqual(o.environments, ["dev", "staging", "prod"]);
    assert.deepEqual(
      o.rows.map((r) => `${r.tenant}/${r.application}/${r.artifact}`),
      ["team-a/shop/shop", "team-b/bank/bank"],
    );
    const [dev, staging, prod] = o.rows[0]!.cells;
    assert.deepEqual([dev!.environment, dev!.live?.version, dev!.live?.by, dev!.in_progress], ["dev", "1.1.0", "root", null]);
    assert.equal(dev!.last?.id, dev!.live!.id);
    assert.deepEqual(
      [staging!.live?.version, staging!.last?.id, staging!.last?.version, staging!.last?.status],
      ["1.0.0", failedStaging, "1.1.0", "failed"],
    );
    assert.equal(prod!.live?.version, "1.0.0", "the canary's stable release is what runs in prod");
    assert.equal(prod!.in_progress?.id, canary);
    assert.equal(prod!.in_progress?.version, "1.1.0");
    assert.match(prod!.in_progress?.rollout ?? "", /^canary step 2\/3 at 25 %$/);
    assert.match(prod!.in_progress?.waiting ?? "", new RegExp(`manent promote ${canary}`));
    assert.deepEqual(
      o.rows[1]!.cells.map((c) => [c.environment, c.live?.version]),
      [["dev", "2.0.0"]],
    );
  });

  it("shows a caller only what it may read, whatever it asks for", async () => {
    const a = await api(tokens.teamA).overview({});
    assert.deepEqual(
      a.rows.map((r) => r.tenant),
      ["team-a"],
    );
    assert.deepEqual((await api(tokens.teamA).overview({ tenant: "team-b" })).rows, []);
    const b = await api(tokens.teamB).overview({});
    assert.deepEqual([b.environments, b.rows.map((r) => r.application)], [["dev"], ["bank"]]);
    assert.deepEqual(
      (await api(tokens.admin).overview({ application: "bank" })).rows.map((r) => r.tenant),
      ["team-b"],
    );
  });

  it("refuses a malformed filter naming the field", async () => {
    const res = await fetch(new URL("/api/v1/overview?tenant=Team%00A", server.url), {
      headers: { authorization: `Bearer ${tokens.admin}` },
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /tenant/);
  });

  it("manent overview prints one line per environment, in the overview's order", async () => {
    const r = await runCli(["overview", "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    assert.equal(lines[0], "team-a/shop");
    assert.match(lines[1]!, /^ {2}dev {6}1\.1\.0 {2}\d{4}-\d\d-\d\d \d\d:\d\d by root$/);
    // The envconfig changed for the failed deploy: what runs (1.0.0) was deployed with the one before.
    assert.match(
      lines[2]!,
      new RegExp(
        `^  staging  1\\.0\\.0 .* by root; last deploy 1\\.1\\.0 failed \\(${failedStaging}\\); envconfig behind the file: manent diff shows the change$`,
      ),
    );
    assert.match(
      lines[3]!,
      new RegExp(`^  prod {5}1\\.0\\.0 .*; 1\\.1\\.0 running: canary step 2/3 at 25 %; .*manent promote ${canary}.* \\(${canary}\\)$`),
    );
    assert.equal(lines.length, 4);
    const json = await runCli(["overview", "-o", "json"], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.deepEqual((JSON.parse(json.stdout) as Overview).environments, ["dev", "staging", "prod"]);
  });

  it("shows the last drift check's verdict in the cell", async () => {
    assert.equal((await api(tokens.admin).overview({})).rows[0]!.cells[0]!.drift, null, "no check has run");
    // Someone changes a dev target behind manent's back; `manent diff` finds it.
    await writeFile(ws.path("state", "shop-dev-2.release"), "0.9.0");
    const file = await ws.write("shop-dev.yml", { ...descriptor("shop", "dev", artifact, "1.1.0"), tenant: "team-a" });
    const diff = await runCli(["diff", "-f", file], { cwd: ws.dir, server: server.url, token: tokens.admin });
    assert.equal(diff.code, 1, diff.stderr);
    const dev = (await api(tokens.admin).overview({})).rows[0]!.cells[0]!;
    assert.deepEqual([dev.environment, dev.drift?.state, dev.drift?.drifted, dev.drift?.targets], ["dev", "drifted", 1, 2]);
    const text = await runCli(["overview", "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.match(text.stdout.split("\n")[1]!, /; drifted: 1 of 2 targets$/);
  });

  it("shows a release waiting for promotion or approval in the cell of the environment it goes to next", async () => {
    for (const env of ["dev", "staging", "prod"]) await envconfig("team-c", "cart", env);
    await ws.write("envconfig/team-c/cart/pipeline.yml", {
      stages: [{ environment: "dev" }, { environment: "staging", promotion: "manual" }, { environment: "prod", approval: {} }],
    });
    const { id } = await api(tokens.admin).startRelease({
      descriptor: { ...descriptor("cart", "dev", artifact, "3.0.0"), tenant: "team-c" },
      descriptor_file: "cart.yml",
    });
    /** The release once `ok` holds, followed on its event stream (no polling). */
    const until = async (ok: (r: ReleaseRecord) => boolean): Promise<ReleaseRecord> => {
      let r = await api(tokens.admin).release(id);
      if (!ok(r) && r.status === "running") {
        await api(tokens.admin).streamEvents(
          `/api/v1/releases/${id}/events`,
          (e) => {
            if (e.type === "release.updated" || e.type === "release.status") r = { ...r, ...(e.data as Partial<ReleaseRecord>) };
            return ok(r) || r.status !== "running";
          },
          { after: 0 },
        );
      }
      assert.ok(ok(r), `release ${id} is ${r.status} (${r.error?.message ?? r.waiting?.hint ?? ""})`);
      return r;
    };
    const cart = async (token: string) => (await api(token).overview({ application: "cart" })).rows[0]?.cells ?? [];

    const atPromotion = await until((r) => r.waiting?.kind === "promotion");
    let cells = await cart(tokens.admin);
    assert.deepEqual(
      cells.map((c) => [c.environment, c.live?.version ?? null, c.pending.map((p) => `${p.version} ${p.waiting_for} ${p.action}`)]),
      [
        ["dev", "3.0.0", []],
        ["staging", null, ["3.0.0 promotion promote"]],
      ],
    );
    const staging = cells[1]!;
    assert.equal(staging.last, null, "nothing was deployed to staging yet");
    assert.deepEqual(
      [staging.pending[0]!.release_id, staging.pending[0]!.from, staging.pending[0]!.since],
      [id, ["dev"], atPromotion.waiting!.since],
    );
    const text = await runCli(["overview", "--application", "cart", "-o", "text"], {
      cwd: ws.dir,
      server: server.url,
      token: tokens.admin,
    });
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(
        `\n  staging +nothing live; 3\\.0\\.0 waiting for promotion since [-\\d]+ [\\d:]+: manent release promote ${id} --to staging\n`,
      ),
    );
    // A token that may read only dev sees no release waiting for staging.
    assert.deepEqual(
      (await cart(tokens.cDev)).map((c) => [c.environment, c.pending.length]),
      [["dev", 0]],
    );

    await api(tokens.admin).releaseCommand(id, "promote", "staging");
    await until((r) => r.waiting?.kind === "approval");
    cells = await cart(tokens.admin);
    assert.deepEqual(
      cells.map((c) => [c.environment, c.live?.version ?? null, c.pending.map((p) => `${p.waiting_for} ${p.action} ${p.from.join(",")}`)]),
      [
        ["dev", "3.0.0", []],
        ["staging", "3.0.0", []],
        ["prod", null, ["approval approve staging"]],
      ],
    );
    await api(tokens.admin).releaseCommand(id, "approve");
    await until((r) => r.status === "succeeded");
    cells = await cart(tokens.admin);
    assert.deepEqual(
      cells.map((c) => [c.environment, c.live?.version, c.pending.length]),
      [
        ["dev", "3.0.0", 0],
        ["staging", "3.0.0", 0],
        ["prod", "3.0.0", 0],
      ],
    );
  });
});
