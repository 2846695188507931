import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { deployReaching } from "../support/deploy-wait.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { deployCalls } from "../support/journal.js";
import { databaseText } from "../support/database-text.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

interface Call {
  path: string;
  query: string;
  authorization: string | undefined;
  event: string | undefined;
  body: Record<string, unknown>;
}

/**
 * Webhook steps (wait until a URL answers 2xx) and the load-test hook, through the real server and
 * CLI, against a real HTTP server on loopback whose answers the test sets per path.
 */
describe("rollout webhook gates and load-test hook", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let databaseUrl: string;
  let server: ServerProcess;
  let artifact: string;
  let web: Server;
  let base: string;
  const calls: Call[] = [];
  const webhookToken = "wh-bearer-9f3e2a71c";
  /** Status answered per path: a list is consumed one answer per call, its last kept. */
  const answers = new Map<string, number[]>();
  const waiters: (() => void)[] = [];

  const journal = (id: string) => deployCalls(ws.path("journal"), id);
  const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, server: server.url });
  const start = async (app: string, rollout: Record<string, unknown>, extra: Record<string, unknown> = {}, api = server.api) => {
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout,
      ...extra,
    });
    return (await api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` })).id;
  };
  /** Resolves once `n` calls reached `path`. */
  const called = async (path: string, n: number): Promise<void> => {
    const deadline = Date.now() + 60_000;
    while (calls.filter((c) => c.path === path).length < n) {
      if (Date.now() > deadline) assert.fail(`${path} was called ${calls.filter((c) => c.path === path).length} times, not ${n}`);
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  /** How a gate step ended (its recorded output). */
  const endedBy = (step: DeployRecord["steps"][number]) => (JSON.parse(step.output!.result) as { ended_by: string }).ended_by;
  /** What the deploy shows but its `resolve` step, which records the envconfig as written (URLs included, as for analysis checks). */
  const shown = (d: DeployRecord) => JSON.stringify({ ...d, steps: d.steps.filter((s) => s.name !== "resolve") });
  const until = (id: string, ok: (d: DeployRecord) => boolean, what: string, api = server.api) => deployReaching(api, id, ok, what);

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "webhooks\n");
    web = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const url = new URL(req.url!, "http://x");
        const list = answers.get(url.pathname) ?? [404];
        const status = list.length > 1 ? list.shift()! : list[0]!;
        const raw = Buffer.concat(chunks).toString("utf8");
        calls.push({
          path: url.pathname,
          query: url.search,
          authorization: req.headers.authorization,
          event: req.headers["x-manent-event"] as string | undefined,
          body: raw ? (JSON.parse(raw) as Record<string, unknown>) : {},
        });
        res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "go" : "no");
        for (const w of waiters.splice(0)) w();
      });
    });
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
    databaseUrl = await pg.createDatabase();
    config = await ws.write("manent.yml", manentYml(databaseUrl));
    server = await startServer(config, { cwd: ws.dir, env: { WEBHOOK_TOKEN: webhookToken } });
  });
  after(async () => {
    await server?.stop();
    web?.closeAllConnections();
    web?.close();
    await pg?.stop();
  });

  it("waits while the URL answers no, goes on at its first 2xx, and POSTs the deploy's metadata without secrets", async () => {
    answers.set("/confirm-a", [503, 409, 200]);
    const url = `${base}/confirm-a?token=s3cret-value`;
    const id = await start("wha", {
      canary: { steps: [{ set_weight: 10 }, { webhook: { url, interval: "100ms" } }, { set_weight: 100 }] },
    });
    await called("/confirm-a", 1);
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const mine = calls.filter((c) => c.path === "/confirm-a");
    assert.equal(mine.length, 3);
    for (const c of mine) {
      assert.equal(c.query, "?token=s3cret-value");
      assert.equal(c.event, "confirm");
      assert.deepEqual(Object.keys(c.body).sort(), ["deploy", "event", "rollout", "sent_at"]);
      assert.deepEqual(c.body.deploy, {
        id,
        tenant: "untenanted",
        application: "wha",
        environment: "prod",
        version: "2.0.0",
        previous_version: null,
        plugin: "noop",
      });
      assert.deepEqual(c.body.rollout, { step: "canary-2:webhook", wave: null, weight: 10 });
    }
    const gate = d.steps.find((s) => s.name === "canary-2:webhook")!;
    assert.equal(gate.status, "succeeded");
    assert.match(endedBy(gate), new RegExp(`^go: POST ${base}/confirm-a\\?… answered 200$`));
    assert.deepEqual((await journal(id)).slice(-3), ["set_candidate_weight weight=100", "promote_candidate", "retire_previous"]);
    assert.doesNotMatch(shown(d), /s3cret/);
  });

  it("aborts when the URL never says go, naming the URL without its query and its last answer", async () => {
    answers.set("/confirm-b", [409]);
    const url = `${base}/confirm-b?key=s3cret-value`;
    const id = await start("whb", {
      canary: { steps: [{ set_weight: 20 }, { webhook: { url, interval: "100ms", timeout: "3s" } }, { set_weight: 100 }] },
    });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.equal(d.error!.code, "deadline_exceeded");
    const u = `${base}/confirm-b?…`.replace(/[.?]/g, "\\$&");
    assert.match(
      d.error!.message,
      new RegExp(
        `^canary step 2 \\(webhook ${u}\\): POST ${u} did not answer 2xx within 3s \\(last: POST ${u} answered 409\\); weight 0, candidate reverted$`,
      ),
    );
    assert.equal(d.steps.find((s) => s.name === "canary-2:webhook")!.status, "failed");
    assert.deepEqual((await journal(id)).slice(-2), ["scale_candidate weight=0", "revert_candidate"]);
    assert.doesNotMatch(shown(d), /s3cret/);
  });

  it("a gate between waves shows the URL's last answer while it waits, and a promote goes on without its go", async () => {
    answers.set("/confirm-c", [503]);
    await ws.write(`envconfig/untenanted/whc/whc/prod.yml`, {
      plugin: "noop",
      targets: [
        { host: "whc-1", labels: { n: "1" } },
        { host: "whc-2", labels: { n: "2" } },
      ],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout: { waves: { by: ["n"], between: [{ webhook: { url: `${base}/confirm-c`, interval: "100ms" } }] } },
    });
    const wid = (await server.api.submit({ descriptor: descriptor("whc", "prod", artifact, "2.0.0"), descriptor_file: "whc.yml" })).id;
    const waiting = await until(wid, (d) => /answered 503/.test(d.rollout?.waiting?.hint ?? ""), "a hint with the last answer");
    assert.equal(waiting.rollout!.waiting!.kind, "webhook");
    assert.equal(
      waiting.rollout!.waiting!.hint,
      `waiting until POST ${base}/confirm-c answers 2xx (manent promote ${wid} to go on without it); last: POST ${base}/confirm-c answered 503`,
    );
    const status = await cli("status", wid, "-o", "text");
    assert.match(status.stdout, /⏸ waiting until POST .*confirm-c answers 2xx .*; last: POST .*confirm-c answered 503/);
    await called("/confirm-c", 2);
    const promoted = await cli("promote", wid);
    assert.equal(promoted.code, 0, promoted.stderr);
    const d = await server.api.deploy(wid, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const gate = d.steps.find((s) => s.name === "wave-1:gate-1:webhook")!;
    assert.match(endedBy(gate), /^promote by \S+ \(last: POST http:\/\/127\.0\.0\.1:\d+\/confirm-c answered 503\)$/);
  });

  it("stops at once when the address rules refuse the URL (a cloud's metadata address), calling nothing", async () => {
    const id = await start("whd", {
      canary: { steps: [{ set_weight: 10 }, { webhook: { url: "http://169.254.169.254/latest/meta-data?x=s3cret", interval: "100ms" } }] },
    });
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "rolled_back");
    assert.equal(d.error!.code, "invalid_argument");
    assert.match(
      d.error!.message,
      /^canary step 2 \(webhook http:\/\/169\.254\.169\.254\/latest\/meta-data\?…\) failed: POST http:\/\/169\.254\.169\.254\/latest\/meta-data\?… refused: .*rollout\.canary\.steps\.1\.webhook\.url/,
    );
    assert.doesNotMatch(shown(d), /s3cret/);
  });

  it("calls the load-test hook before an analysis step, and aborts naming it when it answers an error", async () => {
    answers.set("/load", [200]);
    answers.set("/health", [200]);
    const analysis = { checks: { health: { http: { url: `${base}/health` }, interval: "50ms", count: 1 } } };
    const rollout = (load: string) => ({
      load_test: { url: `${base}${load}?auth=s3cret` },
      canary: { steps: [{ set_weight: 30 }, { analysis: { checks: ["health"] } }, { set_weight: 100 }] },
    });
    const before = calls.length;
    const id = await start("whe", rollout("/load"), { analysis });
    const ok = await server.api.deploy(id, 60);
    assert.equal(ok.status, "succeeded", JSON.stringify(ok.error));
    const mine = calls.slice(before).filter((c) => c.path === "/load" || c.path === "/health");
    const seen = mine.map((c) => `${c.path} ${c.event ?? ""}`.trim());
    assert.deepEqual(seen, ["/load load_test", "/health"], "the hook is called before the first measurement");
    const hook = mine[0]!;
    assert.deepEqual(hook.body.rollout, { step: "canary-2:analysis:load_test", wave: null, weight: 30 });
    assert.equal(ok.steps.find((s) => s.name === "canary-2:analysis:load_test")!.status, "succeeded");

    answers.set("/load-broken", [400]);
    const bad = await server.api.deploy(await start("whe", rollout("/load-broken"), { analysis }), 60);
    assert.equal(bad.status, "rolled_back");
    assert.match(
      bad.error!.message,
      /^canary step 2 \(analysis health\) failed: load test POST http:\/\/127\.0\.0\.1:\d+\/load-broken\?… answered 400; weight 0, candidate reverted$/,
    );
    assert.doesNotMatch(shown(bad), /s3cret/);
  });

  it("sends a webhook's and the load-test hook's bearer_token (a secret reference), recorded nowhere", async () => {
    answers.set("/confirm-auth", [200]);
    answers.set("/load-auth", [200]);
    answers.set("/health", [200]);
    const analysis = { checks: { health: { http: { url: `${base}/health` }, interval: "50ms", count: 1 } } };
    const before = calls.length;
    const id = await start(
      "whb",
      {
        load_test: { url: `${base}/load-auth`, bearer_token: "env:WEBHOOK_TOKEN" },
        canary: {
          steps: [
            { set_weight: 10 },
            { webhook: { url: `${base}/confirm-auth`, bearer_token: "env:WEBHOOK_TOKEN", interval: "100ms" } },
            { analysis: { checks: ["health"] } },
            { set_weight: 100 },
          ],
        },
      },
      { analysis },
    );
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const mine = calls.slice(before).filter((c) => c.path !== "/health");
    assert.deepEqual(
      mine.map((c) => `${c.path} ${c.authorization ?? "none"}`),
      [`/confirm-auth Bearer ${webhookToken}`, `/load-auth Bearer ${webhookToken}`],
    );
    assert.doesNotMatch(JSON.stringify(d), new RegExp(webhookToken));
    assert.doesNotMatch(await databaseText(databaseUrl), new RegExp(webhookToken));

    // A reference that cannot be read is refused at submission, naming the file and field; nothing is recorded.
    const count = (await server.api.list({ application: "whb" })).deploys.length;
    await assert.rejects(
      start("whb", {
        canary: { steps: [{ set_weight: 10 }, { webhook: { url: `${base}/confirm-auth`, bearer_token: "env:NO_SUCH_TOKEN" } }] },
      }),
      /whb\/prod\.yml: rollout\.canary\.steps\.1\.webhook\.bearer_token: .*environment variable NO_SUCH_TOKEN is not set/,
    );
    assert.equal((await server.api.list({ application: "whb" })).deploys.length, count);
    assert.equal(calls.slice(before).filter((c) => c.path === "/confirm-auth").length, 1);
  });

  it("refuses a webhook URL with credentials or that is not http(s), naming the file and field", async () => {
    for (const [url, why] of [
      ["ftp://example.com/x", /must be an http\(s\) URL/],
      ["https://user:pw@example.com/x", /must not carry credentials/],
    ] as const) {
      await assert.rejects(
        start("whf", { canary: { steps: [{ webhook: { url } }] } }),
        (err: Error) =>
          /whf\/prod\.yml/.test(err.message) && /rollout\.canary\.steps\.0\.webhook\.url/.test(err.message) && why.test(err.message),
      );
    }
  });

  it("resumes the wait after a server kill: the deadline and the calls go on where they were", async () => {
    await server.stop();
    answers.set("/confirm-g", [503]);
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "canary-2:webhook:2:after" } });
    let id = "";
    try {
      id = await start(
        "whg",
        { canary: { steps: [{ set_weight: 10 }, { webhook: { url: `${base}/confirm-g`, interval: "100ms", timeout: "10m" } }] } },
        {},
        doomed.api,
      );
      const exit = await doomed.exited;
      assert.equal(exit.signal, "SIGKILL", doomed.logs().slice(-3000));
    } finally {
      await doomed.stop().catch(() => undefined);
    }
    answers.set("/confirm-g", [200]);
    server = await startServer(config, { cwd: ws.dir });
    const d = await server.api.deploy(id, 120);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const gate = d.steps.find((s) => s.name === "canary-2:webhook")!;
    assert.equal(gate.status, "succeeded");
    assert.match(endedBy(gate), /^go: POST .*\/confirm-g answered 200$/);
    // Two calls before the kill (the second's answer not checkpointed: made once more), then the go.
    const n = calls.filter((c) => c.path === "/confirm-g").length;
    assert.ok(n >= 3 && n <= 4, `${n} calls`);
    assert.equal((await journal(id)).filter((c) => c === "deploy_candidate").length, 1);
  });
});
