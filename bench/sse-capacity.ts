/**
 * Issue 24, item 4: event stream capacity of one manent-server (the embedded Postgres, the noop
 * plugin). It opens `--streams` SSE streams of `GET /api/v1/events` and holds them, while
 * `--reconnecting` other clients each close their stream and open it again with Last-Event-ID once a
 * second, and one application deploys continuously so every stream gets events. For `--seconds` it
 * prints:
 *  - the share of stream opens (request sent → response headers) within 1 s, and their p50/p99/max,
 *    for the held streams' first open and for the reconnections;
 *  - memory per held stream: the server's RSS with the streams open less the RSS before, divided by
 *    the streams;
 *  - events delivered to the held streams, and how many streams got none (a stream that opened but
 *    hears nothing is not held).
 *
 * Run: node --import tsx bench/sse-capacity.ts [--streams 1000] [--reconnecting 200] [--seconds 30] [--cpu-prof DIR] [--json]
 *   --cpu-prof  a V8 CPU profile of manent-server into DIR (bench/support/cpu-profile.mjs)
 */
import { connect, type Socket } from "node:net";
import { loadavg } from "node:os";
import { mkdir, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { startServer } from "../test/support/server-process.js";
import { createWorkspace, descriptor, manentYml } from "../test/support/workspace.js";
import { watchMachine } from "./support/machine-share.js";

const { values: opts } = parseArgs({
  options: {
    streams: { type: "string", default: "1000" },
    reconnecting: { type: "string", default: "200" },
    seconds: { type: "string", default: "30" },
    "cpu-prof": { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const held = Number(opts.streams);
const reconnecting = Number(opts.reconnecting);
const seconds = Number(opts.seconds);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number): number =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]! : Number.NaN;
const mb = (b: number): number => Math.round((b / 1048576) * 10) / 10;

const ws = await createWorkspace("manent-bench-");
const artifact = await ws.write("dist/app.txt", "bench\n");
const config = await ws.write("manent.yml", manentYml(undefined));
await ws.write("envconfig/untenanted/busy/busy/bench.yml", { plugin: "noop", targets: [{ host: "b0" }, { host: "b1" }] });
const env: Record<string, string> = { MANENT_LOG_LEVEL: "warn" };
if (opts["cpu-prof"]) {
  await mkdir(resolve(opts["cpu-prof"]), { recursive: true });
  env.MANENT_BENCH_CPU_PROF_DIR = resolve(opts["cpu-prof"]);
  env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --import ${pathToFileURL(join(import.meta.dirname, "support", "cpu-profile.mjs")).href}`;
}
const server = await startServer(config, { cwd: ws.dir, env });
const rss = async (): Promise<number> =>
  Number(/VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${server.child.pid}/status`, "utf8"))![1]) * 1024;
const url = new URL("/api/v1/events", server.url);

interface Stream {
  socket: Socket;
  events: number;
  lastId: string | undefined;
  closed: boolean;
}

/**
 * Opens one stream; resolves with the time to its response headers (rejects on a refusal). The
 * client is a raw socket with a minimal parser (status line, then each message's `id:` line) so that
 * its CPU, on the cores it shares with the server, goes to measuring the server rather than to
 * node:http's parser and chunk decoding. Chunk-size lines fall between messages (the server
 * writes whole messages), so they never split an `id:` line.
 */
function open(lastId: string | undefined): Promise<{ stream: Stream; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const stream: Stream = { socket, events: 0, lastId, closed: false };
    socket.setEncoding("latin1");
    socket.write(
      `GET ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\naccept: text/event-stream\r\n${lastId ? `last-event-id: ${lastId}\r\n` : ""}\r\n`,
    );
    let headers = true;
    let buf = "";
    socket.on("data", (chunk: string) => {
      buf += chunk;
      if (headers) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        if (!buf.startsWith("HTTP/1.1 200")) {
          socket.destroy();
          return reject(new Error(`stream refused: ${buf.slice(0, buf.indexOf("\r\n"))}`));
        }
        headers = false;
        resolve({ stream, ms: performance.now() - t0 });
        buf = buf.slice(end + 4);
      }
      // Only complete messages are counted; the rest waits for the next chunk.
      const end = buf.lastIndexOf("\n\n");
      if (end < 0) return;
      for (let at = buf.indexOf("\nid: "); at >= 0 && at < end; at = buf.indexOf("\nid: ", at + 5)) {
        stream.events++;
        stream.lastId = buf.slice(at + 5, buf.indexOf("\n", at + 5));
      }
      buf = buf.slice(end + 2);
    });
    socket.on("error", (err) => (headers && !stream.closed ? reject(err) : undefined));
    socket.on("close", () => {
      stream.closed = true;
      if (headers) reject(new Error("stream closed before its headers"));
    });
  });
}

let deploying = true;
let deploys = 0;
const deployer = (async () => {
  for (let i = 0; deploying; i++) {
    const { id } = await server.api.submit({ descriptor: descriptor("busy", "bench", artifact, `1.0.${i}`), descriptor_file: "bench" });
    await server.api.deploy(id, 60);
    deploys++;
    await sleep(500);
  }
})();

const figures: Record<string, number> = {};
const machine = watchMachine();
try {
  await sleep(2000);
  const rssBefore = await rss();
  // The held streams, opened 100 at a time (a crowd arriving, not one burst of a thousand SYNs).
  const heldStreams: Stream[] = [];
  const firstOpen: number[] = [];
  for (let i = 0; i < held; i += 100) {
    const batch = await Promise.all(Array.from({ length: Math.min(100, held - i) }, () => open(undefined)));
    for (const b of batch) {
      heldStreams.push(b.stream);
      firstOpen.push(b.ms);
    }
  }
  await sleep(2000);
  const rssHeld = await rss();

  // The reconnecting clients: each holds its stream about a second, closes it, opens it again from its last event.
  const reopen: number[] = [];
  let refused = 0;
  let stop = false;
  const client = async (k: number): Promise<void> => {
    let lastId: string | undefined;
    await sleep((k / reconnecting) * 1000); // spread over the second
    while (!stop) {
      const t = performance.now();
      try {
        const { stream, ms } = await open(lastId);
        reopen.push(ms);
        await sleep(Math.max(0, 1000 - (performance.now() - t)));
        lastId = stream.lastId;
        stream.closed = true;
        stream.socket.destroy();
      } catch {
        refused++;
        await sleep(100);
      }
    }
  };
  const eventsAtStart = heldStreams.reduce((a, s) => a + s.events, 0);
  const clients = Array.from({ length: reconnecting }, (_, k) => client(k));
  await sleep(seconds * 1000);
  const rssChurn = await rss();
  stop = true;
  await Promise.all(clients);
  const delivered = heldStreams.reduce((a, s) => a + s.events, 0) - eventsAtStart;
  const silent = heldStreams.filter((s) => s.events === 0 || s.closed).length;
  for (const s of heldStreams) s.socket.destroy();

  const within = (xs: number[]) => Math.round((xs.filter((x) => x <= 1000).length / Math.max(1, xs.length)) * 1000) / 10;
  Object.assign(figures, {
    held_streams: held,
    held_open_within_1s_pct: within(firstOpen),
    held_open_ms_p50: Math.round(pct(firstOpen, 0.5)),
    held_open_ms_p99: Math.round(pct(firstOpen, 0.99)),
    reconnects: reopen.length,
    reconnects_per_s: Math.round((reopen.length / seconds) * 10) / 10,
    reconnect_open_within_1s_pct: within(reopen),
    reconnect_open_ms_p50: Math.round(pct(reopen, 0.5)),
    reconnect_open_ms_p99: Math.round(pct(reopen, 0.99)),
    reconnect_open_ms_max: Math.round(Math.max(...reopen)),
    refused,
    rss_before_mb: mb(rssBefore),
    rss_held_mb: mb(rssHeld),
    rss_with_reconnects_mb: mb(rssChurn),
    kb_per_held_stream: Math.round(((rssHeld - rssBefore) / held / 1024) * 10) / 10,
    events_to_held_streams: delivered,
    held_streams_silent_or_closed: silent,
    deploys,
    load_average: loadavg()[0]!,
  });
  console.log(
    `${held} held streams: ${figures.held_open_within_1s_pct}% opened within 1 s (p50 ${figures.held_open_ms_p50} ms, p99 ${figures.held_open_ms_p99} ms); ` +
      `server RSS ${figures.rss_before_mb} -> ${figures.rss_held_mb} MB (${figures.kb_per_held_stream} KB per stream)`,
  );
  console.log(
    `${reconnecting} clients reconnecting each second for ${seconds} s: ${figures.reconnects} opens (${figures.reconnects_per_s}/s), ` +
      `${figures.reconnect_open_within_1s_pct}% within 1 s (p50 ${figures.reconnect_open_ms_p50} ms, p99 ${figures.reconnect_open_ms_p99} ms, ` +
      `max ${figures.reconnect_open_ms_max} ms), ${refused} refused; RSS ${figures.rss_with_reconnects_mb} MB`,
  );
  console.log(
    `events delivered to the held streams meanwhile: ${delivered} (${deploys} deploys); held streams silent or closed: ${silent} (load ${figures.load_average!.toFixed(1)})`,
  );
} finally {
  deploying = false;
  await deployer.catch(() => undefined);
  await server.stop();
}
const share = machine.report();
if (opts.json) console.log(JSON.stringify({ ...share, bench: "sse-capacity", ...figures }));
