import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { createInterface } from "node:readline";
import { createSecureContext } from "node:tls";
import { Code, ManentError } from "../../core/errors.js";
import type { Logger } from "../../core/contract/types.js";
import { DeployerService } from "../gen/deployer.js";
import { GRPCBrokerService } from "../gen/go-plugin/grpc_broker.js";
import { GRPCControllerService } from "../gen/go-plugin/grpc_controller.js";
import { GRPCStdioService, StdioData_Channel, type StdioData } from "../gen/go-plugin/grpc_stdio.js";
import { HealthService } from "../gen/go-plugin/health.js";
import { Broker } from "../protocol/broker.js";
import { HEALTH_SERVICE, MAGIC_COOKIE_KEY } from "../protocol/constants.js";
import { clientCredentials, serverCredentials } from "../protocol/credentials.js";
import { parseHandshake } from "../protocol/handshake.js";
import { derToPem, type Identity } from "../protocol/mtls.js";
import { MAX_PLUGIN_MESSAGE_BYTES, H2Channel, type UnaryClient } from "../protocol/h2-channel.js";
import type { StagedBinary } from "./activation.js";
import { pluginEnvironment } from "./environment.js";
import { forwardStderr } from "./stderr-forwarder.js";
import { SecretsService } from "./secrets-service.js";
import type { Reaper } from "./reaper.js";

/** Linux without a reaper: ask the kernel to SIGKILL the plugin when the host dies (util-linux setpriv). */
const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

export interface SpawnOptions {
  plugin: string;
  binary: StagedBinary;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  startTimeoutMs: number;
  logger: Logger;
  /** Kill the plugin with the host (the reaper, else the parent-death signal through setpriv). */
  parentDeathSignal: boolean;
  /** The plugin host's reaper: kills the plugin when the host dies, without an exec per start. */
  reaper?: Reaper;
  /** The host's throwaway AutoMTLS identity for this start (generated while the binary is staged). */
  identity: Identity;
  /** Called once the child exists, so a concurrent stop can kill it before the handshake ends. */
  onSpawn?(child: ChildProcess): void;
}

/**
 * A started plugin process and its clients, all on one mTLS HTTP/2 connection (the host's lean
 * gRPC client, protocol/h2-channel.ts): the Deployer, health and controller calls, the broker and
 * stdio streams.
 */
export interface PluginProcess {
  readonly pid: number;
  /** The gRPC target the plugin announced (`unix:/path` or `host:port`). */
  readonly target: string;
  readonly deployer: UnaryClient<typeof DeployerService>;
  readonly health: UnaryClient<typeof HealthService>;
  readonly controller: UnaryClient<typeof GRPCControllerService>;
  readonly broker: Broker;
  /** The Secrets service on the broker (one per process, a broker id per call). */
  readonly secrets: SecretsService;
  /** Resolves when the process has exited (with its exit code or signal). */
  readonly exited: Promise<string>;
  hasExited(): boolean;
  /** Closes the channel and SIGKILLs the process. */
  kill(): void;
  closeChannel(): void;
}

/**
 * Spawns the staged binary with a clean environment and a fresh client certificate, reads and
 * checks the go-plugin handshake, connects over mTLS pinned to the announced server certificate,
 * opens the broker stream and drains the stdio stream. All within `startTimeoutMs`; on any
 * failure the process is killed and the error names the plugin.
 */
export async function spawnPlugin(o: SpawnOptions): Promise<PluginProcess> {
  const identity = o.identity;
  const env = pluginEnvironment(process.env, o.env, identity.certPem, o.binary.dir);
  const reaper = o.parentDeathSignal ? o.reaper : undefined;
  const [file, argv] =
    o.parentDeathSignal && !reaper && setpriv
      ? [setpriv, ["--pdeathsig", "KILL", "--", o.binary.path, ...o.args]]
      : [o.binary.path, o.args];
  // stdin is a pipe the host never writes: EOF tells an SDK that the host is gone.
  const child = spawn(file, argv, { env, cwd: o.cwd, stdio: ["pipe", "pipe", "pipe"] });
  if (reaper && child.pid !== undefined) {
    const pid = child.pid;
    reaper.watch(pid);
    child.once("exit", () => reaper.forget(pid));
  }
  o.onSpawn?.(child);
  const stderr = forwardStderr(child.stderr!, o.plugin, o.logger);
  let exitedFlag = false;
  const exited = new Promise<string>((resolve) => {
    child.once("exit", (code, signal) => {
      exitedFlag = true;
      resolve(signal ? `signal ${signal}` : `exit code ${code}`);
    });
    child.once("error", (err) => {
      exitedFlag = true;
      resolve(`spawn error: ${err.message}`);
    });
  });
  const fail = (msg: string, code: Code = Code.Unavailable): ManentError => {
    const tail = stderr.tail();
    return new ManentError(code, `plugin ${o.plugin}: ${msg}${tail.length ? `; last stderr: ${tail.slice(-3).join(" | ")}` : ""}`, {
      details: { plugin: o.plugin },
    });
  };

  let channel: H2Channel | undefined;
  const timer = new AbortController();
  const timeout = new Promise<never>((_, reject) => {
    const t = setTimeout(
      () => reject(fail(`did not start within ${o.startTimeoutMs} ms (spawn and handshake)`, Code.DeadlineExceeded)),
      o.startTimeoutMs,
    );
    timer.signal.addEventListener("abort", () => clearTimeout(t));
  });
  try {
    const lines = createInterface({ input: child.stdout!, crlfDelay: Infinity });
    const firstLine = new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      void exited.then(async (how) => {
        // Its last words say why; stderr may still hold them when the exit is seen.
        await Promise.race([stderr.ended, sleep(500)]);
        reject(refusedCookie(stderr.tail()) ? cookieRefused(o.plugin, how, stderr.tail()) : fail(`exited before the handshake (${how})`));
      });
    });
    const line = await Promise.race([firstLine, timeout]);
    // After the handshake stdout must stay silent; anything there is reported, never parsed.
    lines.on("line", (l) =>
      o.logger.warn("plugin wrote to stdout, which is reserved for the handshake", { plugin: o.plugin, line: l.slice(0, 200) }),
    );
    const hs = parseHandshake(line, o.plugin);
    if (!hs.serverCert) throw fail("handshake carries no server certificate: manent requires go-plugin AutoMTLS", Code.FailedPrecondition);
    const serverPem = derToPem(hs.serverCert);
    const target = hs.network === "unix" ? `unix:${hs.address}` : hs.address;
    channel = new H2Channel({
      network: hs.network,
      address: hs.address,
      secureContext: createSecureContext({ ca: serverPem, cert: identity.certPem, key: identity.keyPem }),
      serverDer: hs.serverCert,
      maxReceiveBytes: MAX_PLUGIN_MESSAGE_BYTES,
    });
    await Promise.race([
      channel.ready().catch((err: Error) => Promise.reject(fail(`cannot connect: ${err.message}`))),
      timeout,
      exited.then((how) => Promise.reject(fail(`exited during connection (${how})`))),
    ]);
    const deployer = channel.client(DeployerService);
    const health = channel.client(HealthService);
    const controller = channel.client(GRPCControllerService);
    const broker = new Broker(
      o.binary.dir,
      () => serverCredentials(identity, serverPem),
      () => clientCredentials(identity, serverPem, hs.serverCert!),
    );
    broker.attach(channel.stream(GRPCBrokerService.startStream));
    const secrets = new SecretsService(broker, o.binary.dir, identity, serverPem);
    drainStdio(channel, o);
    timer.abort();
    const ch = channel;
    return {
      pid: child.pid!,
      target,
      deployer,
      health,
      controller,
      broker,
      secrets,
      exited,
      hasExited: () => exitedFlag,
      kill() {
        void secrets.dispose();
        broker.close();
        ch.close();
        if (!exitedFlag) child.kill("SIGKILL");
      },
      closeChannel() {
        void secrets.dispose();
        broker.close();
        ch.close();
      },
    };
  } catch (err) {
    timer.abort();
    channel?.close();
    if (!exitedFlag) child.kill("SIGKILL");
    await exited;
    throw err;
  }
}

/**
 * go-plugin's Serve, and manent's SDKs, print "…not meant to be executed directly…" and exit 1 when
 * the magic cookie is missing or not theirs: a binary for another host, or another protocol.
 */
function refusedCookie(stderrTail: string[]): boolean {
  return stderrTail.some((line) => /not meant to be executed directly/i.test(line));
}

/** Permanent: the same binary refuses the same cookie on every start. `reason` tells the supervisor not to retry. */
function cookieRefused(plugin: string, how: string, stderrTail: string[]): ManentError {
  return new ManentError(
    Code.FailedPrecondition,
    `plugin ${plugin}: exited before the handshake (${how}): it refused manent's magic cookie ${MAGIC_COOKIE_KEY}, so it is not a manent plugin ` +
      `or was built for another host or protocol version; not restarting it (replace the binary, then run: manent plugins restart ${plugin}); ` +
      `its stderr: ${stderrTail.slice(-3).join(" | ")}`,
    { details: { plugin, reason: magicCookieRefused } },
  );
}

/** `details.reason` of the error of a start that the plugin refused for its magic cookie. */
export const magicCookieRefused = "magic_cookie_refused";

/** go-plugin's StreamStdio: called once, drained into the log (debug: it is not hclog). */
function drainStdio(channel: H2Channel, o: SpawnOptions): void {
  const stream = channel.stream(GRPCStdioService.streamStdio);
  stream.on("data", (d: StdioData) => {
    const text = d.data.toString("utf8").trimEnd();
    if (text) o.logger.debug(text, { plugin: o.plugin, stream: d.channel === StdioData_Channel.STDOUT ? "stdout" : "stderr" });
  });
  stream.on("error", () => {
    /* ends with the process; an SDK without stdio answers UNIMPLEMENTED */
  });
  // A server-streaming call: its one request (Empty), then our side is done.
  stream.write({});
  stream.end();
}

/** One health check with a deadline, as go-plugin's Ping. */
export async function ping(p: PluginProcess, timeoutMs: number): Promise<void> {
  await p.health.check({ service: HEALTH_SERVICE }, { deadline: Date.now() + timeoutMs });
}
