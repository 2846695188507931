import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { createServer, connect } from "node:net";
import { join } from "node:path";
import { once } from "node:events";

/** The haproxy binary of Debian's package (scripts/ci/haproxy.sh installs it). */
export const haproxyBinary = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].find((p) => existsSync(p));

/** A free loopback port: bound to 0, read, released. */
export async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as { port: number }).port;
  s.close();
  await once(s, "close");
  return port;
}

export interface SlotServer {
  host: string;
  slot: string;
  port: number;
  /** Live at start: weight 100 in the main backend and ready in the tester backend. */
  live: boolean;
}

/**
 * Two free ports a host, blue live and green idle: the targets' `slot_ports` labels and HAProxy's
 * servers, laid out once for every slot test.
 */
export async function twoSlotHosts(
  hosts: string[],
): Promise<{ targets: { host: string; labels: Record<string, string> }[]; servers: SlotServer[] }> {
  const targets: { host: string; labels: Record<string, string> }[] = [];
  const servers: SlotServer[] = [];
  for (const host of hosts) {
    const blue = await freePort();
    const green = await freePort();
    targets.push({ host, labels: { slot_ports: `blue=${blue},green=${green}` } });
    servers.push({ host, slot: "blue", port: blue, live: true }, { host, slot: "green", port: green, live: false });
  }
  return { targets, servers };
}

/** Kills the app processes slots left running, by the pid files in each host base's run/: a test must not leave them behind. */
export async function killSlotProcesses(hostBases: string[]): Promise<void> {
  for (const base of hostBases) {
    const runDir = join(base, "run");
    for (const f of (await readdir(runDir).catch(() => [] as string[])).filter((x) => x.endsWith(".pid"))) {
      try {
        process.kill(Number(await readFile(join(runDir, f), "utf8")), "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

export interface Haproxy {
  port: number;
  socket: string;
  backend: string;
  testerBackend: string;
  testerHeader: string;
  /** With `routeAcl`: the ACL file of set_header_route, empty at start. */
  routeAcl?: string;
  stop(): Promise<void>;
}

export interface HaproxyOptions {
  /** The frontend also sends requests matching the patterns of an ACL file (manent's header route) to the tester backend. */
  routeAcl?: boolean;
  /** Cookie persistence in both backends: HAProxy sets `SRV=<server>` and sends a request carrying it to that server. */
  sticky?: boolean;
}

/**
 * Starts a real HAProxy on loopback (free port, config and runtime socket in `dir`) in front of
 * the slots: one server per host and slot in `hello`, the same in `hello_testers`, where a
 * request with `X-Canary: always` goes. No health checks: only manent's runtime-API calls
 * decide where traffic goes, so a test sees exactly what the plugin did.
 */
export async function startHaproxy(dir: string, servers: SlotServer[], opts: HaproxyOptions = {}): Promise<Haproxy> {
  if (!haproxyBinary) throw new Error("haproxy is not installed: run scripts/ci/haproxy.sh");
  const port = await freePort();
  const socket = join(dir, "haproxy.sock");
  const routeAcl = opts.routeAcl ? join(dir, "manent-route.acl") : undefined;
  if (routeAcl) await writeFile(routeAcl, "");
  const line = (s: SlotServer, tester: boolean): string =>
    `  server ${s.host}_${s.slot} 127.0.0.1:${s.port}` +
    (opts.sticky ? ` cookie ${s.host}_${s.slot}` : "") +
    (tester ? (s.live ? "" : " disabled") : ` weight ${s.live ? 100 : 0}`);
  const cookie = opts.sticky ? ["  cookie SRV insert indirect nocache"] : [];
  const cfg = [
    "global",
    `  stats socket ${socket} mode 600 level admin`,
    "  maxconn 4096",
    "defaults",
    "  mode http",
    "  timeout connect 2s",
    "  timeout client 10s",
    "  timeout server 10s",
    "frontend web",
    `  bind 127.0.0.1:${port}`,
    "  acl tester req.hdr(X-Canary) -m str always",
    "  use_backend hello_testers if tester",
    ...(routeAcl ? [`  acl manent_route req.hdrs -m reg -f ${routeAcl}`, "  use_backend hello_testers if manent_route"] : []),
    "  default_backend hello",
    "backend hello",
    "  balance roundrobin",
    ...cookie,
    ...servers.map((s) => line(s, false)),
    "backend hello_testers",
    "  balance roundrobin",
    ...cookie,
    ...servers.map((s) => line(s, true)),
    "",
  ].join("\n");
  const cfgPath = join(dir, "haproxy.cfg");
  await writeFile(cfgPath, cfg);
  const child: ChildProcess = spawn(haproxyBinary, ["-f", cfgPath, "-db"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = once(child, "exit");
  // Ready when the runtime socket accepts: haproxy binds it after the frontends.
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${stderr}`);
    if (await accepts(socket)) break;
    if (i > 200) throw new Error(`haproxy did not open ${socket}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    port,
    socket,
    backend: "hello",
    testerBackend: "hello_testers",
    testerHeader: "X-Canary: always",
    ...(routeAcl ? { routeAcl } : {}),
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
    },
  };
}

function accepts(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = connect({ path });
    c.on("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.on("error", () => resolve(false));
  });
}

export interface Answer {
  ok: boolean;
  version?: string;
  slot?: string;
  error?: string;
  /** The `name=value` of each Set-Cookie of the answer. */
  cookies?: string[];
}

/** One GET through HAProxy on a new connection (no keep-alive), so each request is balanced anew. */
export function get(port: number, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/", agent: false, headers: { connection: "close", ...headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => {
        if (res.statusCode !== 200) return resolve({ ok: false, error: `HTTP ${res.statusCode}: ${body.trim()}` });
        try {
          const j = JSON.parse(body) as { version: string; slot: string };
          const cookies = (res.headers["set-cookie"] ?? []).map((c) => c.split(";")[0]!);
          resolve({ ok: true, version: j.version, slot: j.slot, cookies });
        } catch {
          resolve({ ok: false, error: `bad body: ${body}` });
        }
      });
      res.on("error", (e) => resolve({ ok: false, error: e.message }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error("timeout")));
    req.on("error", (e) => resolve({ ok: false, error: e.message }));
    req.end();
  });
}

export interface Tally {
  total: number;
  failed: number;
  byVersion: Record<string, number>;
  errors: string[];
}

/** Sends `n` requests one after another and counts the versions that answered. */
export async function sample(port: number, n: number, headers: Record<string, string> = {}): Promise<Tally> {
  const t: Tally = { total: 0, failed: 0, byVersion: {}, errors: [] };
  for (let i = 0; i < n; i++) record(t, await get(port, headers));
  return t;
}

function record(t: Tally, a: Answer): void {
  t.total++;
  if (!a.ok) {
    t.failed++;
    if (t.errors.length < 10) t.errors.push(a.error ?? "?");
    return;
  }
  t.byVersion[a.version!] = (t.byVersion[a.version!] ?? 0) + 1;
}

/**
 * Requests sent without pause by `workers` loops until stopped (or `max` requests, a bound so a
 * forgotten loop cannot run away), counting every failure: the proof that nothing fails while
 * traffic moves. `paused` holds the loops (after their requests in flight) while a measurement
 * runs alone: HAProxy's round robin is exact for one client, and another client's requests
 * interleaved with it would bias the sample it sees.
 */
export function backgroundTraffic(
  port: number,
  workers = 2,
  max = 200_000,
): { paused<T>(fn: () => Promise<T>): Promise<T>; stop(): Promise<Tally> } {
  const t: Tally = { total: 0, failed: 0, byVersion: {}, errors: [] };
  let stopped = false;
  let gate: Promise<void> | undefined;
  let inFlight = 0;
  let idle: (() => void) | undefined;
  const loops = Array.from({ length: workers }, async () => {
    while (!stopped && t.total < max) {
      while (gate) await gate;
      inFlight++;
      const a = await get(port);
      inFlight--;
      record(t, a);
      if (inFlight === 0) idle?.();
    }
  });
  return {
    async paused<T>(fn: () => Promise<T>): Promise<T> {
      let open!: () => void;
      gate = new Promise<void>((r) => (open = r));
      if (inFlight > 0) await new Promise<void>((r) => (idle = r));
      idle = undefined;
      try {
        return await fn();
      } finally {
        gate = undefined;
        open();
      }
    },
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return t;
    },
  };
}

/** The share of answers from `version`, in percent. */
export function share(t: Tally, version: string): number {
  const ok = t.total - t.failed;
  return ok === 0 ? 0 : (100 * (t.byVersion[version] ?? 0)) / ok;
}
