import { spawn } from "node:child_process";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { dirname, basename } from "node:path";
import { TestCa } from "./test-ca.js";

/**
 * git's smart HTTP over TLS, as a git host serves it: the real `git http-backend` (CGI) behind a
 * Node https server with a certificate from a test CA, asking for `Authorization: Bearer <token>`.
 * `hold()` keeps the next upload-pack answer (a fetch's pack) back until it is let go.
 */
export async function gitHttpsServer(bare: string, token: string) {
  const ca = await TestCa.create("git-ca");
  const { certPem, keyPem } = await ca.server();
  const authorizations: (string | undefined)[] = [];
  const urls: string[] = [];
  let held: { bytes: number; reached: () => void; release: Promise<void> } | undefined;
  let failing = false;
  const server: Server = createServer({ cert: certPem, key: keyPem }, (req, res) => {
    authorizations.push(req.headers.authorization);
    urls.push(req.url ?? "");
    if (failing) return void res.writeHead(503).end("down for maintenance\n");
    if (req.headers.authorization !== `Bearer ${token}`) {
      return void res.writeHead(401, { "www-authenticate": 'Bearer realm="git"' }).end("no\n");
    }
    const url = new URL(req.url ?? "/", "https://localhost");
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: dirname(bare),
        GIT_HTTP_EXPORT_ALL: "1",
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? "GET",
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        REMOTE_ADDR: "127.0.0.1",
        ...(req.headers["git-protocol"] && { GIT_PROTOCOL: String(req.headers["git-protocol"]) }),
      },
    });
    req.pipe(cgi.stdin);
    const chunks: Buffer[] = [];
    cgi.stdout.on("data", (c: Buffer) => chunks.push(c));
    cgi.on("close", async () => {
      const out = Buffer.concat(chunks);
      const end = out.indexOf("\r\n\r\n");
      const head = out.subarray(0, end).toString().split("\r\n");
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head) {
        const [k, ...v] = line.split(":");
        if (k!.toLowerCase() === "status") status = Number.parseInt(v.join(":").trim(), 10);
        else headers[k!] = v.join(":").trim();
      }
      const body = out.subarray(end + 4);
      res.writeHead(status, headers);
      // Only an answer longer than what is let through: a pack, not the ref listing before it.
      if (url.pathname.endsWith("/git-upload-pack") && held && body.length > held.bytes) {
        const h = held;
        held = undefined;
        res.write(body.subarray(0, h.bytes)); // the answer started, then nothing more until let go
        h.reached();
        await h.release;
        res.end(body.subarray(h.bytes));
      } else res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}/${basename(bare)}`,
    caPem: ca.certPem,
    /** The Authorization header of each request, and each request's URL (path and query). */
    authorizations,
    urls,
    /** Holds the next fetch's pack after its first `bytes`: resolves once those are sent; the returned function lets the rest go. */
    hold(bytes = 8): Promise<() => void> {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      return new Promise((reached) => (held = { bytes, reached: () => reached(release), release: released }));
    },
    /** Answers every request 503 (a host down) until set back. */
    fail(on: boolean) {
      failing = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
