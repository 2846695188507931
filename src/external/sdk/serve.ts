import { X509Certificate } from "node:crypto";
import { fstatSync, mkdtempSync, rmSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { format } from "node:util";
import { Server, type ServerDuplexStream } from "@grpc/grpc-js";
import type { Factory } from "../../core/contract/deployer.js";
import type { Logger } from "../../core/contract/types.js";
import { DeployerService } from "../gen/deployer.js";
import { GRPCBrokerService, type ConnInfo } from "../gen/go-plugin/grpc_broker.js";
import { Broker } from "../protocol/broker.js";
import { ENV, MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE } from "../protocol/constants.js";
import { clientCredentials, serverCredentials } from "../protocol/credentials.js";
import { formatHandshake } from "../protocol/handshake.js";
import { encodeRawBase64, generateIdentity } from "../protocol/mtls.js";
import { deployerService } from "./deployer-service.js";
import { addController, addHealth, StdioData_Channel, StdioRelay } from "./go-plugin-services.js";
import { hclogLogger } from "./logger.js";

export interface ServeOptions {
  /** How often to check that the host is still the parent (default 1 s). */
  parentCheckMs?: number;
}

/**
 * Runs a TypeScript external plugin: the plugin side of go-plugin's gRPC protocol around the
 * author's factory. It checks the magic cookie, serves Deployer, health, broker, stdio and
 * controller over AutoMTLS on a private unix socket, prints the handshake line on stdout (the
 * only thing ever written there) and exits when the host asks, or when the host is gone.
 */
export async function serve(factory: Factory, options: ServeOptions = {}): Promise<void> {
  const stderr = (line: string) => void process.stderr.write(line);
  if (process.env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
    stderr(
      "This binary is a manent plugin. It is not meant to be executed directly:\nconfigure it under plugins.<name>.external in manent.yml.\n",
    );
    process.exit(1);
  }
  const logger: Logger = hclogLogger(stderr);
  const clientPem = process.env[ENV.clientCert];
  if (!clientPem) {
    logger.error("PLUGIN_CLIENT_CERT is not set: manent always uses AutoMTLS, refusing to serve without it");
    process.exit(1);
  }
  let clientDer: Buffer;
  try {
    clientDer = new X509Certificate(clientPem).raw;
  } catch (err) {
    logger.error("PLUGIN_CLIENT_CERT is not a PEM certificate", { error: (err as Error).message });
    process.exit(1);
  }

  // stdout carries the handshake only. console.* goes to stderr (forwarded as plain lines), any
  // other write to process.stdout to go-plugin's stdio stream.
  const relay = new StdioRelay();
  for (const m of ["log", "info", "debug"] as const) console[m] = (...args: unknown[]) => stderr(format(...args) + "\n");
  const takeStdout = () => {
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      relay.push(StdioData_Channel.STDOUT, Buffer.from(chunk));
      const cb = rest.find((r) => typeof r === "function") as (() => void) | undefined;
      cb?.();
      return true;
    }) as typeof process.stdout.write;
  };
  takeStdout();

  const identity = await generateIdentity();
  const dir = mkdtempSync(path.join(process.env[ENV.unixSocketDir] || os.tmpdir(), "manent-plugin-"));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  process.on("exit", cleanup);

  const broker = new Broker(
    dir,
    () => serverCredentials(identity, clientPem),
    () => clientCredentials(identity, clientPem, clientDer),
  );
  const server = new Server({ "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
  const exit = (code: number) => {
    server.forceShutdown();
    process.exit(code);
  };
  server.addService(DeployerService, deployerService(factory, logger, broker));
  server.addService(GRPCBrokerService, { startStream: (call: ServerDuplexStream<ConnInfo, ConnInfo>) => broker.attach(call) });
  addHealth(server);
  addController(server, () => exit(0));
  relay.register(server);

  const socket = path.join(dir, "plugin.sock");
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, serverCredentials(identity, clientPem), (err) => (err ? reject(err) : resolve())),
  );

  // go-plugin plugins ignore interrupts: the host stops them (Ctrl-C reaches the whole group).
  process.on("SIGINT", () => {});
  watchParent(options.parentCheckMs ?? 1_000, () => {
    logger.warn("host process is gone, exiting");
    exit(0);
  });

  writeSync(1, formatHandshake({ network: "unix", address: socket, serverCertRaw64: encodeRawBase64(identity.der) }));
}

/**
 * Exits with the host. The manent host gives the plugin a pipe on stdin that it never writes:
 * EOF there means the host died. Hosts that pass another stdin (go-plugin passes its own) are
 * covered by noticing the parent pid change (re-parenting to init or a subreaper).
 */
function watchParent(intervalMs: number, gone: () => void): void {
  try {
    if (fstatSync(0).isFIFO()) {
      process.stdin.on("end", gone);
      process.stdin.on("error", gone);
      process.stdin.resume();
    }
  } catch {
    // No stdin at all: rely on the parent pid.
  }
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) gone();
  }, intervalMs).unref();
}
