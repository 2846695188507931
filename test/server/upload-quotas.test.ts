import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const tokens = { teamA: "team-a-token-0123456789", viewerA: "team-a-viewer-0123456789", teamB: "team-b-token-0123456789" };
const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");
/** 2 KiB of one character: five of them do not fit the 5 KiB cache, nor eight uploads team-a's 16 KiB quota. */
const body = (c: string) => Buffer.from(c.repeat(2048));

/** Resolves once the deploy waits at its approval. */
async function waitingAtApproval(api: ApiClient, id: string): Promise<void> {
  for (;;) {
    const d = await api.deploy(id);
    if (d.rollout?.waiting?.kind === "approval") return;
    assert.ok(!["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status), `deploy ended (${d.status}) before its approval`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Issue 20, item 2, on a real server and Postgres: a tenant's uploads are bounded by its quota (413
 * naming it and the use, nothing kept), deleted by their tenant only and never while a deploy needs
 * them, swept by the retention rule (what the last releases and the deploys in progress need stays),
 * counted in a metric; the workdir's artifacts cache stays under its size but for what a running
 * deploy holds.
 */
describe("upload quotas, deletion, retention and the artifacts cache", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let teamA: ApiClient;
  let teamB: ApiClient;

  const request = async (token: string, method: string, path: string, payload?: Buffer | ReadableStream<Uint8Array>) => {
    const res = await fetch(new URL(path, server.url), {
      method,
      headers: { authorization: `Bearer ${token}`, ...(payload && { "content-type": "application/octet-stream" }) },
      ...(payload && { body: payload, duplex: "half" }),
    } as RequestInit);
    return { status: res.status, json: (await res.json()) as Record<string, unknown> & { error?: { code: string; message: string } } };
  };
  const upload = async (api: ApiClient, tenant: string, name: string, content: Buffer) => {
    const file = await ws.write(`files/${name}`, content.toString());
    await api.upload(tenant, sha(content), file, content.length);
    return `upload:${sha(content)}/${name}`;
  };
  const deploy = async (app: string, version: string, source: string) => {
    const { id } = await teamA.submit({
      descriptor: {
        apiVersion: "manent/v1",
        tenant: "team-a",
        application: app,
        environment: "prod",
        artifact: { type: "file", name: app, version, source },
      },
    });
    return id;
  };
  const ended = async (id: string) => (await teamA.deploy(id, 120)).status;
  const cacheEntries = async () => {
    const dir = ws.path("work/artifacts/team-a");
    const out = new Map<string, number>();
    for (const entry of await readdir(dir)) {
      if (!/^[0-9a-f]{64}$/.test(entry)) continue;
      let bytes = 0;
      for (const f of await readdir(join(dir, entry))) bytes += (await stat(join(dir, entry, f))).size;
      out.set(entry, bytes);
    }
    return out;
  };
  const listing = async (api = teamA) => api.uploads();
  const metric = async (name: string, labels = "") => {
    const text = await (await fetch(new URL("/metrics", server.url))).text();
    const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
    return line === undefined ? undefined : Number(line.split(" ")[1]);
  };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    const hashed = (token: string) => createHash("sha256").update(token).digest("hex");
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: {
          tokens: [
            { name: "team-a", tenant: "team-a", sha256: hashed(tokens.teamA) },
            { name: "team-a-viewer", tenant: "team-a", role: "viewer", sha256: hashed(tokens.viewerA) },
            { name: "team-b", tenant: "team-b", sha256: hashed(tokens.teamB) },
          ],
        },
        artifacts: { allowed_paths: ["."], cache_size: "5KiB" },
        uploads: {
          quota_per_tenant: "16KiB",
          tenant_quotas: { "team-b": "3KiB" },
          retention: { keep_releases: 2, min_age: 0, sweep_interval: 0 },
        },
      }),
    );
    for (const app of ["shop", "gated"]) {
      await ws.write(`envconfig/team-a/${app}/${app}/prod.yml`, {
        plugin: "noop",
        targets: ["eu-1", "us-1"].map((h) => ({ host: `${app}-${h}`, labels: { region: h.slice(0, 2) } })),
        params: { state_dir: ws.path("state") },
        ...(app === "gated" && { rollout: { waves: { by: ["region"], between: [{ approval: {} }] } } }),
      });
    }
    server = await startServer(config, { cwd: ws.dir });
    teamA = new ApiClient(server.url, tokens.teamA);
    teamB = new ApiClient(server.url, tokens.teamB);
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("refuses an upload over the tenant's quota with 413 naming the quota and the use, keeping nothing", async () => {
    const first = body("b");
    assert.equal((await request(tokens.teamB, "PUT", `/api/v1/uploads/${sha(first)}`, first)).status, 201);
    const second = body("c");
    const refused = await request(tokens.teamB, "PUT", `/api/v1/uploads/${sha(second)}`, second);
    assert.equal(refused.status, 413, JSON.stringify(refused.json));
    assert.equal(refused.json.error!.code, "resource_exhausted");
    assert.match(
      refused.json.error!.message,
      /tenant team-b would go over its upload quota of 3 KiB \(uploads\.tenant_quotas\.team-b in manent\.yml\): 2 KiB stored, this upload 2 KiB/,
    );
    // Without a declared length (chunked), the body is received, then refused at the write.
    const chunked = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(second);
        c.close();
      },
    });
    const refusedChunked = await request(tokens.teamB, "PUT", `/api/v1/uploads/${sha(second)}`, chunked);
    assert.equal(refusedChunked.status, 413, JSON.stringify(refusedChunked.json));
    assert.match(refusedChunked.json.error!.message, /quota of 3 KiB/);
    // Nothing of it kept: no row, no staged file; the same bytes as before are still welcome (nothing new stored).
    assert.equal((await request(tokens.teamB, "GET", `/api/v1/uploads/${sha(second)}`)).status, 404);
    assert.deepEqual(await readdir(ws.path("work/uploads-incoming")), []);
    const mine = await listing(teamB);
    assert.deepEqual(
      mine.uploads.map((u) => u.sha256),
      [sha(first)],
    );
    assert.equal(mine.used_bytes, 2048);
    assert.equal(mine.quota_bytes, 3072);
    assert.equal((await request(tokens.teamB, "PUT", `/api/v1/uploads/${sha(first)}`, first)).status, 200);
    // The CLI says the same, exit 2 (a refused request).
    await ws.write("files/big.txt", second.toString());
    await ws.write("big.yml", {
      apiVersion: "manent/v1",
      tenant: "team-b",
      application: "shop",
      environment: "prod",
      artifact: { type: "file", name: "shop", version: "1", source: "./files/big.txt" },
    });
    const cli = await runCli(["deploy", "-f", "big.yml"], { cwd: ws.dir, server: server.url, token: tokens.teamB });
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /would go over its upload quota of 3 KiB .*: 2 KiB stored, this upload 2 KiB/);
  });

  it("deletes an upload for its own tenant only: another tenant's is not found, a viewer is refused", async () => {
    const content = body("d");
    const path = `/api/v1/uploads/${sha(content)}`;
    await upload(teamA, "team-a", "d.txt", content);
    const fromB = await request(tokens.teamB, "DELETE", `${path}?tenant=team-a`);
    assert.equal(fromB.status, 404, JSON.stringify(fromB.json));
    assert.equal((await request(tokens.teamB, "GET", `/api/v1/uploads?tenant=team-a`)).status, 404);
    const fromViewer = await request(tokens.viewerA, "DELETE", path);
    assert.equal(fromViewer.status, 403, JSON.stringify(fromViewer.json));
    assert.match(fromViewer.json.error!.message, /needs the submit or dry_run permission/);
    assert.equal((await request(tokens.teamA, "GET", path)).status, 200);

    const listed = await runCli(["uploads", "list", "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /tenant team-a: 1 uploads, 2 KiB \(quota 16 KiB\)/);
    assert.match(listed.stdout, new RegExp(`${sha(content)}\\t2 KiB\\t.*\\t-`));
    const removed = await runCli(["uploads", "rm", sha(content), "-o", "json"], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual(JSON.parse(removed.stdout), [{ sha256: sha(content), size: 2048, tenant: "team-a" }]);
    assert.equal((await request(tokens.teamA, "GET", path)).status, 404);
    const again = await runCli(["uploads", "rm", sha(content)], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.equal(again.code, 2);
    assert.match(again.stderr, new RegExp(`no upload ${sha(content)} for tenant team-a`));
    const audit = await teamA.audit({ action: "upload_delete" });
    assert.ok(
      audit.entries.some((e) => e.outcome === "ok"),
      JSON.stringify(audit.entries),
    );
  });

  it("keeps what deploys in progress and the last releases need, removes the rest; the cache stays bounded but for what a deploy holds", async () => {
    const [u1, u2, u3, u4, u5, u6] = ["1", "2", "3", "4", "5", "6"].map((c) => body(c));
    // A deploy waiting at its approval holds its upload (in progress) and its cache entry.
    const gated = await deploy("gated", "5", await upload(teamA, "team-a", "app5.txt", u5!));
    await waitingAtApproval(teamA, gated);
    for (const [version, content] of [
      ["1", u1!],
      ["2", u2!],
      ["3", u3!],
    ] as const) {
      assert.equal(await ended(await deploy("shop", version, await upload(teamA, "team-a", `app${version}.txt`, content))), "succeeded");
    }
    await upload(teamA, "team-a", "app4.txt", u4!); // never deployed
    // Cache: 5 KiB; the gated deploy's entry, the oldest, stays while it runs; shop 1 and 2 were evicted.
    assert.deepEqual(new Set((await cacheEntries()).keys()), new Set([sha(u5!), sha(u3!)]));
    assert.equal(await metric("manent_artifact_cache_bytes"), 4096);

    // manent rollback returns shop to 2: releases (newest first) 2, 3 are the last two kept.
    const { id: back } = await teamA.rollback({
      descriptor: {
        apiVersion: "manent/v1",
        tenant: "team-a",
        application: "shop",
        environment: "prod",
        artifact: { type: "file", name: "shop", version: "3", source: "/unused" },
      },
    });
    assert.equal(await ended(back), "succeeded");

    const needed = await request(tokens.teamA, "DELETE", `/api/v1/uploads/${sha(u2!)}`);
    assert.equal(needed.status, 409, JSON.stringify(needed.json));
    assert.match(
      needed.json.error!.message,
      /is needed by deploy [0-9a-f-]{36} of shop\/prod version 2 \(one of the last 2 versions released there/,
    );
    const inProgress = await request(tokens.teamA, "DELETE", `/api/v1/uploads/${sha(u5!)}`);
    assert.equal(inProgress.status, 409, JSON.stringify(inProgress.json));
    assert.match(
      inProgress.json.error!.message,
      new RegExp(`needed by deploy ${gated} of gated/prod version 5 \\(running: it may still fetch it\\)`),
    );

    const dry = await teamA.sweepUploads(undefined, true);
    assert.deepEqual(new Set(dry.removed.map((r) => r.sha256)), new Set([sha(u1!), sha(u4!)]));
    assert.equal((await listing()).uploads.length, 5, "a dry run removes nothing");
    const sweep = await runCli(["uploads", "sweep", "-o", "text"], { cwd: ws.dir, server: server.url, token: tokens.teamA });
    assert.equal(sweep.code, 0, sweep.stderr);
    assert.match(sweep.stdout, /tenant team-a: removed 2 uploads \(4 KiB\)/);
    let kept = await listing();
    assert.deepEqual(new Set(kept.uploads.map((u) => u.sha256)), new Set([sha(u2!), sha(u3!), sha(u5!)]));
    assert.deepEqual(
      kept.uploads.find((u) => u.sha256 === sha(u5!))!.needed_by.map((n) => [n.deploy, n.reason]),
      [[gated, "in_progress"]],
    );
    assert.equal(await metric("manent_upload_bytes", '{tenant="team-a"}'), kept.used_bytes);
    assert.equal(await metric("manent_upload_bytes", '{tenant="team-b"}'), 2048);

    // The gated deploy ends: its hold on the cache goes; it stays kept as its application's one release.
    await teamA.rolloutCommand(gated, "approve");
    assert.equal(await ended(gated), "succeeded");
    // shop 6: releases are now 6 and 2 (the rollback's return); 3 is no longer needed. Its fetch evicts the gated entry (least recently used, free now).
    assert.equal(await ended(await deploy("shop", "6", await upload(teamA, "team-a", "app6.txt", u6!))), "succeeded");
    assert.deepEqual(new Set((await cacheEntries()).keys()), new Set([sha(u3!), sha(u6!)]));
    assert.deepEqual(
      (await teamA.sweepUploads(undefined, false)).removed.map((r) => r.sha256),
      [sha(u3!)],
    );
    kept = await listing();
    assert.deepEqual(new Set(kept.uploads.map((u) => u.sha256)), new Set([sha(u2!), sha(u5!), sha(u6!)]));
    // What was kept for a rollback still deploys: shop 2 again, fetched anew (evicted from the cache).
    assert.equal(await ended(await deploy("shop", "2", `upload:${sha(u2!)}/app2.txt`)), "succeeded");
    assert.equal(await metric("manent_upload_bytes", '{tenant="team-a"}'), 3 * 2048);
  });
});
