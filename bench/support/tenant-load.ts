/**
 * One tenant's clients for bench/tenant-isolation.ts, in a process of their own (so the server, not
 * a shared event loop, is what the tenants compete for).
 *  read URL TOKEN SECONDS CONCURRENCY: GET /api/v1/deploys?limit=20 in a loop; prints one JSON
 *    line of the answers' times in ms (p50, p95, p99, max), their count and the failures.
 *  abuse URL TOKEN SECONDS CUTTERS: CUTTERS connections each announcing a 20 MB upload, sending
 *    64 KiB and dropping it, again and again; and one loop of uploads over the tenant's quota
 *    (refused 413); prints the counts.
 */
import { createHash, randomBytes } from "node:crypto";
import { request } from "node:http";

const [mode, url, token, secondsArg, nArg] = process.argv.slice(2);
const until = Date.now() + Number(secondsArg) * 1000;
const n = Number(nArg);
const running = () => Date.now() < until;
const auth = { authorization: `Bearer ${token}` };

if (mode === "read") {
  const times: number[] = [];
  let failed = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (running()) {
        const started = performance.now();
        const res = await fetch(`${url}/api/v1/deploys?limit=20`, { headers: auth }).catch(() => undefined);
        if (!res || res.status !== 200) failed++;
        await res?.arrayBuffer();
        times.push(performance.now() - started);
      }
    }),
  );
  times.sort((a, b) => a - b);
  const at = (q: number) => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]! * 10) / 10;
  process.stdout.write(`${JSON.stringify({ requests: times.length, failed, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1) })}\n`);
} else if (mode === "abuse") {
  let cuts = 0;
  let refused = 0;
  const cutter = async () => {
    while (running()) {
      await new Promise<void>((resolve) => {
        const sha = createHash("sha256").update(randomBytes(16)).digest("hex");
        const req = request(`${url}/api/v1/uploads/${sha}`, {
          method: "PUT",
          headers: { ...auth, "content-type": "application/octet-stream", "content-length": String(20 << 20) },
        });
        req.on("error", () => resolve());
        req.write(randomBytes(64 * 1024), () => {
          req.destroy();
          resolve();
        });
      });
      cuts++;
    }
  };
  const overQuota = async () => {
    const body = randomBytes(2 << 20);
    const sha = createHash("sha256").update(body).digest("hex");
    while (running()) {
      const res = await fetch(`${url}/api/v1/uploads/${sha}`, {
        method: "PUT",
        headers: { ...auth, "content-type": "application/octet-stream" },
        body,
      }).catch(() => undefined);
      if (res?.status === 413) refused++;
      await res?.arrayBuffer();
    }
  };
  await Promise.all([...Array.from({ length: n }, cutter), overQuota()]);
  process.stdout.write(`${JSON.stringify({ cuts, refused })}\n`);
} else {
  process.stderr.write("usage: tenant-load.ts read|abuse URL TOKEN SECONDS N\n");
  process.exit(2);
}
