import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { deployReaching } from "../support/deploy-wait.js";
import { collect } from "../support/event-stream.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TokenServer } from "../support/token-server.js";
import { descriptor, type Workspace } from "../support/workspace.js";

const tokens = { admin: "windows-admin-token-0001", deployer: "windows-deployer-tok-002", otherAdmin: "windows-team-b-admin-003" };
const hour = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Deploy windows and freezes on a real server (deploy_windows in manent.yml): a deploy in a freeze
 * waits durably, saying until when and why (API, events, CLI), survives a SIGKILL of the server and
 * runs once the freeze ends; a deny window in refuse mode refuses at submission (412); an admin's
 * override with a reason runs at once and is audited; a deployer's override is refused (403).
 */
describe("deploy windows", () => {
  const fx = new TokenServer();
  const { api, request } = fx;
  let ws: Workspace;
  let config: string;
  let artifact: string;
  const freezeStart = Date.now() - hour;
  const freezeEnd = Date.now() + hour;
  const shop = (environment: string, version = "1.0.0") => ({ ...descriptor("shop", environment, artifact, version), tenant: "team-a" });
  const windows = (end: number) => ({
    windows: [
      // Open at every hour for an hour: staging is always inside it, and refused.
      { name: "staging-closed", kind: "deny", schedule: "0 * * * *", duration: "1h", environment: "staging", mode: "refuse" },
    ],
    freezes: [{ name: "year-end", start: iso(freezeStart), end: iso(end), reason: "Year-end sales", environment: "prod" }],
  });
  let waiting = "";

  before(async () => {
    ({ ws, config, artifact } = await fx.startWithTokens("windows\n", [
      { name: "root", tenant: "*", token: tokens.admin },
      { name: "ci", tenant: "team-a", role: "deployer", token: tokens.deployer },
      { name: "b-admin", tenant: "team-b", role: "admin", token: tokens.otherAdmin },
    ]));
    await ws.write("staging.yml", shop("staging"));
    for (const [app, env] of [
      ["shop", "prod"],
      ["shop", "staging"],
      ["cart", "prod"],
      ["gift", "prod"],
      ["promo", "dev"],
      ["promo", "staging"],
    ] as const) {
      await ws.write(`envconfig/team-a/${app}/${app}/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `${app}-${env}` }],
        params: { state_dir: ws.path("state") },
      });
    }
    // The server started without windows; started again with them (the same database).
    await restart(windows(freezeEnd));
  });
  after(() => fx.stop());

  async function restart(deployWindows: unknown, how: "stop" | "kill" = "stop"): Promise<ServerProcess> {
    const yml = parse(await readFile(config, "utf8")) as Record<string, unknown>;
    await writeFile(config, stringify({ ...yml, deploy_windows: deployWindows }));
    await (how === "kill" ? fx.server!.kill() : fx.server!.stop());
    fx.server = await startServer(config, { cwd: ws.dir });
    return fx.server;
  }

  /** The deploy's events from its first, up to the one that matches. */
  async function eventsUntil(id: string, match: (e: DeployEvent) => boolean): Promise<DeployEvent[]> {
    const stream = collect(fx.server!.url, tokens.deployer, `/api/v1/deploys/${id}/events`, { after: 0 });
    await stream.waitFor(match);
    await stream.stop();
    return stream.events;
  }

  it("holds a deploy in a freeze, saying until when and why, in the answer, the record, the events and the CLI", async () => {
    const submitted = await api(tokens.deployer).submit({ descriptor: shop("prod"), descriptor_file: "shop.yml" });
    waiting = submitted.id;
    const hint = `waiting for deploy window until ${iso(freezeEnd)} (freeze year-end: Year-end sales)`;
    assert.equal(submitted.waiting?.hint, hint);
    const d = await deployReaching(api(tokens.deployer), waiting, (x) => x.waiting != null, "its record says what it waits for");
    assert.equal(d.status, "queued");
    assert.deepEqual(
      { ...d.waiting, since: undefined },
      { kind: "deploy_window", since: undefined, until: iso(freezeEnd), rule: "freeze year-end: Year-end sales", hint },
    );
    const events = await eventsUntil(waiting, (e) => e.type === "deploy.waiting");
    assert.equal((events.at(-1)!.data.waiting as { hint: string }).hint, hint);
    const status = await runCli(["status", waiting, "-o", "text"], { cwd: ws.dir, server: fx.server!.url, token: tokens.deployer });
    assert.match(status.stdout, new RegExp(hint.replace(/[()]/g, "\\$&")));
    // Dry runs change nothing: not held.
    const dry = await api(tokens.deployer).submit({ descriptor: shop("prod"), descriptor_file: "shop.yml", dry_run: true });
    assert.equal((await api(tokens.deployer).deploy(dry.id, 60)).status, "succeeded");
  });

  it("refuses at submission (412) a deploy a deny window in refuse mode keeps out, and through the CLI", async () => {
    const answer = await request(tokens.deployer, "POST", "/api/v1/deploys", { descriptor: shop("staging"), descriptor_file: "shop.yml" });
    assert.equal(answer.status, 412, answer.text);
    assert.equal(answer.error?.code, "failed_precondition");
    assert.match(
      answer.error!.message,
      /deploy of team-a\/shop in staging refused: outside its deploy window \(deny window staging-closed\); no opening found within a year/,
    );
    assert.match(answer.error!.message, /--override-window/);
    const cli = await runCli(["deploy", "-f", "staging.yml"], { cwd: ws.dir, server: fx.server!.url, token: tokens.deployer });
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /refused: outside its deploy window \(deny window staging-closed\)/);
    const list = await api(tokens.admin).list({ environment: "staging" });
    assert.equal(list.deploys.length, 0, "nothing was queued");
  });

  it("refuses a deployer's override (403) and queues nothing", async () => {
    const answer = await request(tokens.deployer, "POST", "/api/v1/deploys", {
      descriptor: shop("staging"),
      descriptor_file: "shop.yml",
      window_override: { reason: "hotfix" },
    });
    assert.equal(answer.status, 403, answer.text);
    assert.match(answer.error!.message, /window_override/);
    assert.equal((await api(tokens.admin).list({ environment: "staging" })).deploys.length, 0);
  });

  it("runs an admin's override at once, through the CLI, with its reason in the audit log", async () => {
    const cli = await runCli(["deploy", "-f", "staging.yml", "--override-window", "INC-42 hotfix", "-o", "json"], {
      cwd: ws.dir,
      server: fx.server!.url,
      token: tokens.admin,
    });
    assert.equal(cli.code, 0, cli.stderr);
    const d = JSON.parse(cli.stdout) as DeployRecord;
    assert.equal(d.status, "succeeded");
    const audit = await api(tokens.admin).audit({ action: "window_override" });
    assert.equal(audit.entries.length, 1);
    assert.equal(audit.entries[0]!.message, "INC-42 hotfix");
    assert.equal(audit.entries[0]!.deploy_id, d.id);
    assert.equal(audit.entries[0]!.actor, "root");
  });

  it("fails a release's stage whose deploy a refuse-mode window keeps out, naming the rule", async () => {
    await ws.write("envconfig/team-a/promo/pipeline.yml", { stages: [{ environment: "dev" }, { environment: "staging" }] });
    const promo = { ...descriptor("promo", "dev", artifact), tenant: "team-a" };
    const { id } = await api(tokens.admin).startRelease({ descriptor: promo, descriptor_file: "promo.yml" });
    let r = await api(tokens.admin).release(id);
    await api(tokens.admin).streamEvents(
      `/api/v1/releases/${id}/events`,
      (e) => {
        if (e.type === "release.status" || e.type === "release.updated") r = { ...r, ...(e.data as Partial<typeof r>) };
        return r.status !== "running";
      },
      { after: 0 },
    );
    r = await api(tokens.admin).release(id);
    assert.equal(r.status, "failed");
    assert.equal(r.stages[0]!.status, "succeeded");
    assert.match(r.error!.message, /stage 2 \(staging\): staging: .*refused: outside its deploy window \(deny window staging-closed\)/);
  });

  it("cancels a deploy waiting for its window at once: nothing ran", async () => {
    const cart = { ...descriptor("cart", "prod", artifact), tenant: "team-a" };
    const { id } = await api(tokens.deployer).submit({ descriptor: cart, descriptor_file: "cart.yml" });
    await deployReaching(api(tokens.deployer), id, (x) => x.waiting != null, "waiting for its window");
    const cancelled = await api(tokens.deployer).cancel(id);
    assert.equal(cancelled.cancel?.outcome, "cancelled");
    const d = await api(tokens.deployer).deploy(id, 60);
    assert.equal(d.status, "cancelled");
    assert.equal(d.steps.length, 0, "no step ran");
    const events = await eventsUntil(id, (e) => e.type === "deploy.waiting" && e.data.waiting === null);
    assert.ok(events.some((e) => e.type === "deploy.status" && e.data.status === "cancelled"));
  });

  it("starts a deploy already waiting when an admin overrides its window, through the CLI, audited; a deployer's or a second override is refused", async () => {
    const gift = { ...descriptor("gift", "prod", artifact), tenant: "team-a" };
    const { id } = await api(tokens.deployer).submit({ descriptor: gift, descriptor_file: "gift.yml" });
    await deployReaching(api(tokens.deployer), id, (x) => x.waiting != null, "waiting for its window");
    const path = `/api/v1/deploys/${id}/window-override`;

    const byDeployer = await request(tokens.deployer, "POST", path, { reason: "hotfix" });
    assert.equal(byDeployer.status, 403, byDeployer.text);
    assert.match(byDeployer.error!.message, /window_override/);
    // Another tenant's admin may not see the deploy at all: 404, as for one that does not exist.
    const otherTenant = await request(tokens.otherAdmin, "POST", path, { reason: "hotfix" });
    assert.equal(otherTenant.status, 404, otherTenant.text);
    const empty = await request(tokens.admin, "POST", path, { reason: "  " });
    assert.equal(empty.status, 400, empty.text);
    assert.match(empty.error!.message, /reason: must say why/);
    assert.equal((await api(tokens.deployer).deploy(id)).status, "queued", "a refused override changes nothing");

    const cli = await runCli(["override-window", id, "--reason", "INC-77 gift cards down"], {
      cwd: ws.dir,
      server: fx.server!.url,
      token: tokens.admin,
    });
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal((JSON.parse(cli.stdout) as DeployRecord).id, id, "in a pipe, the deploy as JSON");
    const d = await api(tokens.deployer).deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.waiting, null);
    assert.equal(await readFile(ws.path("state", "gift-prod.release"), "utf8"), d.version);

    const again = await request(tokens.admin, "POST", path, { reason: "again" });
    assert.equal(again.status, 412, again.text);
    assert.match(again.error!.message, /already overridden by root at .* \("INC-77 gift cards down"\)/);
    const ended = await request(
      tokens.admin,
      "POST",
      `/api/v1/deploys/${(await api(tokens.admin).list({ environment: "staging" })).deploys[0]!.id}/window-override`,
      {
        reason: "late",
      },
    );
    assert.equal(ended.status, 412, ended.text);
    assert.match(ended.error!.message, /is not waiting for a deploy window/);

    const audit = (await api(tokens.admin).audit({ action: "window_override" })).entries.filter((e) => e.deploy_id === id);
    // The refused attempts too, each with its reason and why it was refused (the 400 never reached the action).
    assert.deepEqual(audit.map((e) => `${e.actor} ${e.outcome} ${e.message?.split(":")[0]}`).sort(), [
      "ci permission_denied hotfix",
      "root failed_precondition again",
      "root ok INC-77 gift cards down",
    ]);
    const events = await eventsUntil(id, (e) => e.type === "deploy.status" && e.data.status === "succeeded");
    assert.equal(events.filter((e) => e.type === "deploy.waiting").at(-1)!.data.waiting, null);
  });

  it("keeps the wait across a SIGKILL of the server, and runs the deploy once the freeze ends", async () => {
    assert.ok(waiting, "the first test queued a deploy in the freeze");
    // Back with the freeze ending a few seconds from now: the resumed wait ends then, not at the hour it recorded.
    const end = Date.now() + 4000;
    await restart(windows(end), "kill");
    const d = await api(tokens.deployer).deploy(waiting, 120);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.ok(Date.parse(d.started_at!) >= end - 1000, `started ${d.started_at}, the freeze ended ${iso(end)}`);
    assert.equal(d.waiting, null);
    const events = await eventsUntil(waiting, (e) => e.type === "deploy.status" && e.data.status === "succeeded");
    const waits = events.filter((e) => e.type === "deploy.waiting");
    assert.ok(waits.length >= 2, "waiting, then no longer waiting");
    assert.equal(waits.at(-1)!.data.waiting, null);
  });
});
