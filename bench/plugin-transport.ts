// The plugin host's gRPC transport, side by side (issue 31, part 3): the host's own client on
// node:http2 (src/external/protocol/h2-channel.ts, what the host uses), grpc-js (what it used),
// @connectrpc/connect-node's gRPC protocol over node:http2 (createGrpcTransport), and a bare
// node:http2 unary call (the floor any client on node:http2 pays), with hashicorp/go-plugin's own
// Go host (bench/gohost) as the reference, in one run on one machine.
//
// Per transport, on the Go sample plugin started here exactly as the host starts it (clean
// environment, go-plugin handshake line, AutoMTLS with a fresh client certificate, the plugin's
// certificate from the handshake pinned):
//   - cold start: spawn → handshake line → TLS + HTTP/2 connection → the first Configure answered;
//   - round trip: a no-op Deploy (no targets) on a live connection.
// Transports alternate within each phase (start by start, block by block of calls), so a change of
// the machine's load hits all of them alike. The host's whole path (PluginHost, ExternalPlugin,
// Secrets session on the broker, the broker and stdio streams, all on the host's client) is
// measured beside it, as bench/external-ts.ts does, and the Go host by bench/gohost (bench/external-go.sh's binary).
//
// Usage: node --import tsx bench/plugin-transport.ts [starts=20] [deploys=2000] [--rounds 3] [--json]
//        [--transports grpc_js,connect_node,bare_http2,host_unary] [--transport-only] (no Go host, no whole host path)
// A CPU profile of the TS side: node --cpu-prof --cpu-prof-dir DIR --import tsx bench/plugin-transport.ts …
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http2 from "node:http2";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Metadata, type ChannelOptions } from "@grpc/grpc-js";
import { Deployer, DeployRequestSchema } from "./support/gen-es/deployer_pb.js";
import { ExternalPlugin, PluginHost } from "../src/external/host/index.js";
import { pluginEnvironment } from "../src/external/host/environment.js";
import {
  ConfigureRequest,
  ConfigureResponse,
  DeployerClient,
  DeployerService,
  DeployRequest,
  DeployResponse,
} from "../src/external/gen/deployer.js";
import { clientCredentials, tlsChannelOptions } from "../src/external/protocol/credentials.js";
import { requestToProto } from "../src/external/protocol/convert.js";
import { parseHandshake, type Handshake } from "../src/external/protocol/handshake.js";
import { MAX_PLUGIN_MESSAGE_BYTES, H2Channel } from "../src/external/protocol/h2-channel.js";
import { derToPem, generateIdentity, type Identity } from "../src/external/protocol/mtls.js";
import type { Request } from "../src/plugin.js";
import { watchMachine } from "./support/machine-share.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const json = process.argv.includes("--json");
const positionals = process.argv.slice(2).filter((a, i, all) => !a.startsWith("--") && !["--transports", "--rounds"].includes(all[i - 1]!));
const starts = Number(positionals[0] ?? 20);
const deploys = Number(positionals[1] ?? 2000);
const noop = () => {};
const logger = { debug: noop, info: noop, warn: noop, error: noop };
const run = promisify(execFile);

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
}
const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** A started plugin: the process and its handshake. */
interface Started {
  child: ChildProcess;
  hs: Handshake & { serverCert: Buffer };
  serverPem: string;
  exited: Promise<void>;
}

/** Spawns the plugin as spawnPlugin does (clean environment, client certificate) and reads its handshake line. */
async function startPlugin(binary: string, identity: Identity, dir: string): Promise<Started> {
  const env = pluginEnvironment(process.env, {}, identity.certPem, dir);
  const child = spawn(binary, [], { env, cwd: dir, stdio: ["pipe", "pipe", "ignore"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    void exited.then(() => reject(new Error("plugin exited before its handshake")));
  });
  const hs = parseHandshake(line, "bench");
  if (!hs.serverCert) throw new Error("no AutoMTLS certificate in the handshake");
  return { child, hs: { ...hs, serverCert: hs.serverCert }, serverPem: derToPem(hs.serverCert), exited };
}

/** One client connection to a started plugin. */
interface Conn {
  configure(): Promise<void>;
  deploy(): Promise<void>;
  close(): void;
}

interface Transport {
  key: string;
  label: string;
  connect(s: Started, identity: Identity, base: string): Conn;
}

function noopRequest(base: string): Request {
  return {
    deploymentId: "bench",
    tenant: "t",
    application: "a",
    environment: "e",
    artifact: { type: "file", name: "x", version: "1", source: "x" },
    targets: [],
    params: { base },
    secrets: { secret: async () => "k" },
    parallelism: 1,
    logger,
    signal: new AbortController().signal,
  };
}

/** TLS to the plugin as the host makes it: our certificate, only the handshake's certificate accepted, server name localhost. */
function tlsSocket(s: Started, identity: Identity): tls.TLSSocket {
  const where = s.hs.network === "unix" ? { path: s.hs.address } : hostPort(s.hs.address);
  return tls.connect({
    ...where,
    ca: s.serverPem,
    cert: identity.certPem,
    key: identity.keyPem,
    servername: "localhost",
    ALPNProtocols: ["h2"],
    checkServerIdentity: (_host, cert) =>
      cert.raw.equals(s.hs.serverCert) ? undefined : new Error("plugin server certificate is not the one announced in the handshake"),
  });
}

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

/** grpc-js, as the host used it: a client with the AutoMTLS credentials, a fresh Metadata and CallOptions per call. */
function grpcJsWith(key: string, label: string, options: ChannelOptions): Transport {
  return {
    key,
    label,
    connect(s, identity, base) {
      const target = s.hs.network === "unix" ? `unix:${s.hs.address}` : s.hs.address;
      const client = new DeployerClient(target, clientCredentials(identity, s.serverPem, s.hs.serverCert), options);
      const req = noopRequest(base);
      return {
        configure: () =>
          new Promise((resolve, reject) =>
            client.configure({ configJson: Buffer.from("{}"), secretsSessionBrokerId: 0 }, new Metadata(), {}, (err) =>
              err ? reject(err) : resolve(),
            ),
          ),
        deploy: () =>
          new Promise((resolve, reject) =>
            client.deploy(requestToProto(req, 0), new Metadata(), {}, (err) => (err ? reject(err) : resolve())),
          ),
        close: () => client.close(),
      };
    },
  };
}

/** The channel options the host used with grpc-js (src/external/protocol/credentials.ts). */
const grpcJs = grpcJsWith("grpc_js", "grpc-js, the host's options", tlsChannelOptions);
/**
 * The same with grpc-js's retry layer (which wraps every call and buffers its message for a
 * retry) and channelz's per-call counters off: a candidate cheap win, measured here.
 */
const grpcJsLean = grpcJsWith("grpc_js_lean", "grpc-js, retries and channelz off", {
  ...tlsChannelOptions,
  "grpc.enable_retries": 0,
  "grpc.enable_channelz": 0,
});

/** @connectrpc/connect-node's gRPC protocol over node:http2, on the same TLS socket settings. */
const connectNode: Transport = {
  key: "connect_node",
  label: "connect-node (gRPC over node:http2)",
  connect(s, identity, base) {
    const nodeOptions = { createConnection: () => tlsSocket(s, identity) };
    const sessionManager = new Http2SessionManager("https://localhost", undefined, nodeOptions);
    const client = createClient(Deployer, createGrpcTransport({ baseUrl: "https://localhost", sessionManager }));
    const req = noopRequest(base);
    return {
      configure: async () => void (await client.configure({ configJson: Buffer.from("{}") })),
      // The request as the host would build it per call (from the engine's Request), then sent.
      deploy: async () =>
        void (await client.deploy(
          create(DeployRequestSchema, {
            deploymentId: req.deploymentId,
            tenant: req.tenant,
            application: req.application,
            environment: req.environment,
            artifact: req.artifact,
            targets: [],
            params: { ...req.params },
            parallelism: req.parallelism,
          }),
        )),
      close: () => sessionManager.abort(),
    };
  },
};

/**
 * A bare gRPC unary call on node:http2 with the host's ts-proto codecs: one HTTP/2 stream, the
 * 5-byte message frame, grpc-status from the trailers. Not a client (no deadlines, no retries of a
 * lost session): the floor of what any client on node:http2 pays per call.
 */
const bareHttp2: Transport = {
  key: "bare_http2",
  label: "bare node:http2 (floor)",
  connect(s, identity, base) {
    const session = http2.connect("https://localhost", { createConnection: () => tlsSocket(s, identity) });
    session.on("error", noop);
    const req = noopRequest(base);
    const unary = (method: string, body: Uint8Array): Promise<Buffer> =>
      new Promise((resolve, reject) => {
        const stream = session.request({
          ":method": "POST",
          ":path": `/manent.plugin.v1.Deployer/${method}`,
          "content-type": "application/grpc",
          te: "trailers",
        });
        const frame = Buffer.allocUnsafe(5 + body.length);
        frame[0] = 0;
        frame.writeUInt32BE(body.length, 1);
        frame.set(body, 5);
        stream.end(frame);
        const chunks: Buffer[] = [];
        let grpcStatus: string | undefined;
        stream.on("response", (h) => (grpcStatus = h["grpc-status"] as string | undefined));
        stream.on("trailers", (h) => (grpcStatus = h["grpc-status"] as string | undefined));
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("error", reject);
        stream.on("end", () => {
          if (grpcStatus !== "0") return reject(new Error(`grpc-status ${grpcStatus}`));
          resolve(Buffer.concat(chunks).subarray(5));
        });
      });
    return {
      configure: async () =>
        void ConfigureResponse.decode(
          await unary("Configure", ConfigureRequest.encode({ configJson: Buffer.from("{}"), secretsSessionBrokerId: 0 }).finish()),
        ),
      deploy: async () => void DeployResponse.decode(await unary("Deploy", DeployRequest.encode(requestToProto(req, 0)).finish())),
      close: () => session.close(),
    };
  },
};
/**
 * The host's own unary client (src/external/protocol/unary-channel.ts), as the host uses it: a
 * secure context built per start, the session connected before the first call, a deadline-less
 * Deploy with the request's AbortSignal, ts-proto's codecs through the service definition.
 */
const hostUnary: Transport = {
  key: "host_unary",
  label: "the host's unary client on node:http2",
  connect(s, identity, base) {
    const channel = new H2Channel({
      network: s.hs.network,
      address: s.hs.address,
      secureContext: tls.createSecureContext({ ca: s.serverPem, cert: identity.certPem, key: identity.keyPem }),
      serverDer: s.hs.serverCert,
      maxReceiveBytes: MAX_PLUGIN_MESSAGE_BYTES,
    });
    const client = channel.client(DeployerService);
    const req = noopRequest(base);
    return {
      configure: async () => {
        await channel.ready();
        await client.configure({ configJson: Buffer.from("{}"), secretsSessionBrokerId: 0 }, { deadline: Date.now() + 60_000 });
      },
      deploy: async () => void (await client.deploy(requestToProto(req, 0), { signal: req.signal })),
      close: () => channel.close(),
    };
  },
};
// --transports grpc_js,bare_http2 picks some (for a profile of one); --transport-only skips the Go host and the host's whole path.
const picked = flagValue("--transports")?.split(",");
const transports = [grpcJs, grpcJsLean, connectNode, bareHttp2, hostUnary].filter((t) => !picked || picked.includes(t.key));
const transportOnly = process.argv.includes("--transport-only");
const rounds = Number(flagValue("--rounds") ?? 3);

function flagValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function stop(s: Started, conn?: Conn): Promise<void> {
  conn?.close();
  s.child.kill("SIGKILL");
  await s.exited;
}

/** The host's whole path, as a server runs it (bench/external-ts.ts's figures). */
async function hostPath(plugin: string, base: string, tmp: string): Promise<Figures> {
  const entry = {
    external: {
      command: plugin,
      sha256: createHash("sha256")
        .update(await readFile(plugin))
        .digest("hex"),
    },
  };
  const host = await PluginHost.create({ workdir: path.join(tmp, "work") });
  host.acquire();
  await host.identity();
  const activate = () => ExternalPlugin.activate({ name: "bench", entry, baseDir: tmp, logger, host });
  const cold: number[] = [];
  for (let i = 0; i < starts + 1; i++) {
    const p = await activate();
    const t0 = performance.now();
    await p.capabilities();
    if (i > 0) cold.push(performance.now() - t0); // the first makes the private copy
    await p.close();
  }
  const p = await activate();
  const d = await p.deployer();
  const req = noopRequest(base);
  for (let i = 0; i < 100; i++) await d.deploy(req);
  const rtt: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < deploys; i++) {
    const t0 = performance.now();
    await d.deploy(req);
    rtt.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(cpu0);
  await p.close();
  await host.release();
  return {
    cold_start_ms_p50: round3(quantile(cold, 0.5)),
    deploy_rtt_ms_p50: round3(quantile(rtt, 0.5)),
    deploy_rtt_ms_p99: round3(quantile(rtt, 0.99)),
    deploy_cpu_us_per_call: Math.round((cpu.user + cpu.system) / deploys),
  };
}

type Figures = Record<string, number>;

/** One round: the Go host, then each transport alone, then the host's whole path; all on the same plugin binary. */
async function oneRound(plugin: string, gohost: string, base: string, tmp: string, identity: Identity): Promise<Record<string, Figures>> {
  const out: Record<string, Figures> = {};
  // Go host (go-plugin's client): the reference.
  if (!transportOnly) {
    const { stdout } = await run(gohost, ["-go-plugin", plugin, "-starts", String(starts), "-deploys", String(deploys), "-json"], {
      maxBuffer: 1 << 20,
    });
    process.stderr.write(stdout.split("\n").slice(0, -2).join("\n") + "\n");
    out.go_host = JSON.parse(stdout.trim().split("\n").at(-1)!).go_sample as Figures;
  }

  // Cold starts, transports alternating.
  const cold = new Map<string, number[]>(transports.map((t) => [t.key, []]));
  for (let i = 0; i < starts + 2; i++) {
    for (const t of transports) {
      const t0 = performance.now();
      const s = await startPlugin(plugin, identity, tmp);
      const conn = t.connect(s, identity, base);
      await conn.configure();
      const ms = performance.now() - t0;
      await stop(s, conn);
      if (i >= 2) cold.get(t.key)!.push(ms); // the first two warm up the code paths
    }
  }

  // Round trips: one plugin process per transport, blocks of 100 calls in turn.
  const live = await Promise.all(
    transports.map(async (t) => {
      const s = await startPlugin(plugin, identity, tmp);
      const conn = t.connect(s, identity, base);
      await conn.configure();
      for (let i = 0; i < 100; i++) await conn.deploy();
      return { t, s, conn, rtt: [] as number[], cpuUs: 0 };
    }),
  );
  for (let done = 0; done < deploys; done += 100) {
    for (const l of live) {
      // This process's CPU per call (user + system): what the transport costs the host, which
      // the machine's load inflates less than the wall-clock round trip.
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < Math.min(100, deploys - done); i++) {
        const t0 = performance.now();
        await l.conn.deploy();
        l.rtt.push(performance.now() - t0);
      }
      const cpu = process.cpuUsage(cpu0);
      l.cpuUs += cpu.user + cpu.system;
    }
  }
  for (const l of live) {
    await stop(l.s, l.conn);
    out[l.t.key] = {
      cold_start_ms_p50: round3(quantile(cold.get(l.t.key)!, 0.5)),
      deploy_rtt_ms_p50: round3(quantile(l.rtt, 0.5)),
      deploy_rtt_ms_p99: round3(quantile(l.rtt, 0.99)),
      deploy_cpu_us_per_call: Math.round(l.cpuUs / l.rtt.length),
    };
  }
  if (!transportOnly) out.ts_host = await hostPath(plugin, base, tmp);
  return out;
}

const median = (xs: number[]): number => quantile(xs, 0.5);

async function main(): Promise<void> {
  const machine = watchMachine();
  const tmp = await mkdtemp(path.join(os.tmpdir(), "manent-bench-transport-"));
  const figures: Record<string, unknown> = { bench: "plugin-transport", starts, deploys, rounds };
  try {
    console.log(`node ${process.version}, ${os.cpus().length} cpus (${os.cpus()[0]?.model ?? "?"}), load ${os.loadavg()[0]!.toFixed(1)}`);
    const plugin = path.join(tmp, "go-sample");
    const gohost = path.join(tmp, "gohost");
    await run("go", ["build", "-o", plugin, "."], { cwd: path.join(root, "examples/go-plugin") });
    await run("go", ["build", "-o", gohost, "."], { cwd: path.join(root, "bench/gohost") });
    const base = path.join(tmp, "targets");
    const identity = await generateIdentity();

    const all: Record<string, Figures>[] = [];
    const loads: number[] = [];
    for (let r = 0; r < rounds; r++) {
      loads.push(round3(os.loadavg()[0]!));
      all.push(await oneRound(plugin, gohost, base, tmp, identity));
      console.log(`round ${r + 1}/${rounds} done (load ${os.loadavg()[0]!.toFixed(1)})`);
    }
    figures.load_avg_1m = loads;
    figures.per_round = all;
    // Medians over the rounds of each round's medians, and of each round's ratio to the Go host
    // (the ratio within a round is what the machine's load changes least).
    const med = (key: string, f: string) => round3(median(all.map((r) => r[key]?.[f] ?? NaN)));
    const ratio = (key: string, f: string, goF: string) => round3(median(all.map((r) => (r[key]?.[f] ?? NaN) / (r.go_host?.[goF] ?? NaN))));
    const rows: [string, string][] = [
      ...(transportOnly
        ? []
        : ([
            ["go_host", "Go host (go-plugin client)"],
            ["ts_host", "TS host, whole path (its node:http2 client, Secrets session)"],
          ] as [string, string][])),
      ...transports.map((t): [string, string] => [t.key, `transport alone: ${t.label}`]),
    ];
    console.log(
      `\nmedians of ${rounds} round(s) (${starts} starts, ${deploys} no-op Deploys per round; ratios per round, then their median):`,
    );
    for (const [key, label] of rows) {
      const f: Figures = {
        cold_start_ms_p50: med(key, "cold_start_ms_p50"),
        deploy_rtt_ms_p50: med(key, "deploy_rtt_ms_p50"),
      };
      if (key === "go_host") f.deploy_secrets_rtt_ms_p50 = med(key, "deploy_secrets_rtt_ms_p50");
      else if (!transportOnly) {
        f.cold_start_vs_go = ratio(key, "cold_start_ms_p50", "cold_start_ms_p50");
        // The host's path serves Secrets on the broker, as Go's deploy_secrets_rtt; a transport alone does not, as Go's plain Deploy.
        f.deploy_rtt_vs_go = ratio(key, "deploy_rtt_ms_p50", key === "ts_host" ? "deploy_secrets_rtt_ms_p50" : "deploy_rtt_ms_p50");
      }
      if (key !== "go_host") f.deploy_cpu_us_per_call = med(key, "deploy_cpu_us_per_call");
      figures[key] = f;
      const vs = (x: number | undefined) => (x === undefined ? "" : ` (${x.toFixed(2)}× Go)`);
      console.log(
        `  ${label.padEnd(62)} cold start ${f.cold_start_ms_p50!.toFixed(1)} ms${vs(f.cold_start_vs_go)}; ` +
          `no-op Deploy ${f.deploy_rtt_ms_p50!.toFixed(3)} ms${vs(f.deploy_rtt_vs_go)}` +
          (f.deploy_secrets_rtt_ms_p50 !== undefined ? `, with Secrets on the broker ${f.deploy_secrets_rtt_ms_p50.toFixed(3)} ms` : "") +
          (f.deploy_cpu_us_per_call !== undefined ? `; ${f.deploy_cpu_us_per_call} µs CPU per call` : ""),
      );
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  const share = machine.report();
  if (json) console.log(JSON.stringify({ ...figures, ...share }));
}

await main();
