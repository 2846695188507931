import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const digest = (token: string): string => createHash("sha256").update(token).digest("hex");
const cutterToken = "cutter-token-0123456789";
const steadyToken = "steady-token-0123456789";
const terminal = new Set(["succeeded", "failed", "rolled_back", "cancelled"]);

/**
 * Sends the head of an upload announced as 8 MiB, waits until the server has read into its body
 * (its request is in the upload store by then), and destroys the socket: a client whose connection
 * drops mid-upload. Resolves once the socket is closed.
 */
function cutUpload(url: string, sha256: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const req = request(new URL(`/api/v1/uploads/${sha256}`, url), {
      method: "PUT",
      headers: { authorization: `Bearer ${cutterToken}`, "content-type": "application/octet-stream", "content-length": 8 * 1024 * 1024 },
    });
    req.on("error", () => undefined);
    req.on("close", () => resolve());
    // 2 MiB: more than a socket buffer holds, so `write`'s callback means the server has read some of it.
    req.write(Buffer.alloc(2 * 1024 * 1024, 7), () => req.destroy());
  });
}

/**
 * Issue 20, item 1: a client cutting its uploads short is that client's problem alone. One
 * tenant cuts `PUT /api/v1/uploads/…` mid-body in a loop while another reads and deploys; every
 * request of the other tenant answers 2xx (a cut upload was once taken for a database outage,
 * and the API answered 503 to everyone until the next health check).
 */
describe("uploads cut short by one tenant", () => {
  let ws: Workspace;
  let pgServer: TestPostgres;
  let server: ServerProcess;

  before(async () => {
    ws = await createWorkspace();
    pgServer = await TestPostgres.start();
    await ws.write("dist/app.txt", "payload\n");
    await ws.write("envconfig/steady/shop/shop/prod.yml", {
      plugin: "noop",
      targets: [{ host: "shop-1" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
    });
    const config = manentYml(await pgServer.createDatabase(), {
      auth: {
        tokens: [
          { name: "cutter", tenant: "cutter", sha256: digest(cutterToken) },
          { name: "steady", tenant: "steady", sha256: digest(steadyToken) },
        ],
      },
    });
    server = await startServer(await ws.write("manent.yml", config), { cwd: ws.dir });
  });

  after(async () => {
    await server?.stop();
    await pgServer?.stop();
  });

  it("while one tenant cuts its uploads in a loop, every request of another answers 2xx", async () => {
    const answers: string[] = [];
    const steady = async (method: string, path: string, body?: unknown): Promise<unknown> => {
      const res = await fetch(new URL(path, server.url), {
        method,
        headers: { authorization: `Bearer ${steadyToken}`, ...(body !== undefined && { "content-type": "application/json" }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      answers.push(`${res.status} ${method} ${path}${res.ok ? "" : ` ${text}`}`);
      return res.ok ? (JSON.parse(text) as unknown) : undefined;
    };

    let cuts = 0;
    const cutterAnswers: number[] = [];
    let steadyDone = false;
    const cutter = (async () => {
      // At least 20 cuts, and on for as long as the other tenant works.
      for (let i = 0; i < 20 || !steadyDone; i++) {
        const sha256 = createHash("sha256").update(`upload ${i}`).digest("hex");
        await cutUpload(server.url, sha256);
        cuts++;
        // What a client does next: asks whether its upload arrived (it did not), then tries again.
        const kept = await fetch(new URL(`/api/v1/uploads/${sha256}`, server.url), { headers: { authorization: `Bearer ${cutterToken}` } });
        cutterAnswers.push(kept.status);
      }
    })();

    try {
      for (let round = 0; round < 6 || cuts < 20; round++) {
        await steady("GET", "/api/v1/deploys?tenant=steady&limit=5");
        const submitted = (await steady("POST", "/api/v1/deploys", {
          descriptor: { ...descriptor("shop", "prod", ws.path("dist/app.txt"), `1.0.${round}`), tenant: "steady" },
        })) as { id: string } | undefined;
        if (!submitted) continue;
        for (;;) {
          const d = (await steady("GET", `/api/v1/deploys/${submitted.id}?wait=2`)) as { status: string } | undefined;
          if (!d || terminal.has(d.status)) {
            assert.equal(d?.status, "succeeded", answers.join("\n"));
            break;
          }
        }
        await steady("GET", `/api/v1/deploys/${submitted.id}`);
        await steady("GET", "/api/v1/plugins");
      }
    } finally {
      steadyDone = true;
      await cutter;
    }

    const refused = answers.filter((a) => !a.startsWith("2"));
    assert.deepEqual(refused, [], `${refused.length} of ${answers.length} requests of the other tenant refused during ${cuts} cut uploads`);
    assert.ok(cuts >= 20, `only ${cuts} uploads were cut`);
    // Nothing of a cut upload is kept (its own client may meet a loaded server's 503 meanwhile: that is its business).
    assert.ok(
      cutterAnswers.includes(404) && !cutterAnswers.includes(200),
      `the cutter's checks answered ${[...new Set(cutterAnswers)].join(", ")}`,
    );
    // Issue 20, item 5: pg's warning of a client running two queries at once (DBOS's SET raced the first query).
    assert.doesNotMatch(server.logs(), /already executing a query/);
    process.stderr.write(`# ${answers.length} requests of the other tenant, all 2xx, during ${cuts} cut uploads\n`);
  });
});
