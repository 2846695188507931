import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ServiceError } from "@grpc/grpc-js";
import type { Registry } from "prom-client";
import { Code, ManentError } from "../../core/errors.js";
import { protocolCapabilities, type Capability, type Deployer } from "../../core/contract/deployer.js";
import type { HostedPlugin, PluginSupervision } from "../../core/contract/hosted-plugin.js";
import type { Logger } from "../../core/contract/types.js";
import type { ConfigureResponse } from "../gen/deployer.js";
import { fromServiceError, isTransportLoss } from "../protocol/wire-errors.js";
import { checkBinary, type StagedBinary } from "./activation.js";
import { PluginHost } from "./plugin-host.js";
import { fromSpec, parseExternalEntry, type ExternalConfig } from "./config.js";
import type { ExternalSpec } from "../../core/config/manent-config.js";
import { pluginMetrics, type PluginMetrics } from "./metrics.js";
import { magicCookieRefused, ping, spawnPlugin, type PluginProcess } from "./plugin-process.js";
import { remoteDeployer } from "./remote-deployer.js";
import { backoffDelay, defaultSupervision, type SupervisionOptions } from "./supervision.js";

export interface ExternalPluginOptions {
  /** The name under `plugins` in manent.yml. */
  name: string;
  /**
   * The plugin's manent.yml entry: `external` (as the manent.yml schema parsed it, start_timeout
   * in ms, or with a duration string) plus the plugin's own configuration. Or give `spec`.
   */
  entry?: Record<string, unknown>;
  spec?: { external: Parameters<typeof fromSpec>[0]; config: Record<string, unknown> };
  /** Directory relative commands resolve against (manent's working directory). */
  baseDir: string;
  logger: Logger;
  registry?: Registry;
  /** Names of built-in plugins, which an external plugin may not shadow. */
  builtinNames?: readonly string[];
  supervision?: Partial<SupervisionOptions>;
  /** Kill the plugin with the host via the kernel's parent-death signal (default true). */
  parentDeathSignal?: boolean;
  /**
   * What the server's external plugins share (private copies under its workdir, the AutoMTLS
   * identity). Without it, the plugin has a host of its own under $TMPDIR.
   */
  host?: PluginHost;
}

interface Live {
  proc: PluginProcess;
  staged: StagedBinary;
  /** Why the supervisor killed it, when it did (a hung plugin). */
  killReason?: string;
}

/**
 * An external plugin as the engine sees it: a go-plugin process started on first use, shared by
 * every call, supervised (health pings, restart with backoff, a bounded number of attempts) and
 * stopped by close() after its running calls. Create it with {@link ExternalPlugin.activate}.
 */
export class ExternalPlugin implements HostedPlugin {
  readonly kind = "external" as const;
  readonly name: string;
  private readonly ext: ExternalConfig;
  private readonly config: Record<string, unknown>;
  private readonly command: string;
  private readonly opts: SupervisionOptions;
  private readonly logger: Logger;
  private readonly metrics: PluginMetrics;
  private readonly parentDeathSignal: boolean;
  private host: Promise<PluginHost> | undefined;
  private ownsHost = true;

  private live: Live | undefined;
  private starting: Promise<Live> | undefined;
  private spawning: ChildProcess | undefined;
  private configured: ConfigureResponse | undefined;
  private failures = 0;
  private lastError: string | undefined;
  private nextStartAt = 0;
  private gaveUp = false;
  /** A start that no restart can fix (a refused magic cookie): the supervisor gave up on it at once. */
  private permanentFailure: ManentError | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly stopSignal = new AbortController();
  /** Aborted by an operator's restart: a start waiting out its backoff goes at once. */
  private backoffWake = new AbortController();
  private inflight = 0;
  private idle: (() => void)[] = [];
  private pingTimer: NodeJS.Timeout | undefined;
  private healthyPings = 0;
  private failedPings = 0;
  private totalRestarts = 0;
  private cooldownTimer: NodeJS.Timeout | undefined;
  private lastStartAt: Date | undefined;

  private constructor(o: ExternalPluginOptions, ext: ExternalConfig, config: Record<string, unknown>) {
    this.name = o.name;
    this.ext = ext;
    this.config = config;
    this.command = path.resolve(o.baseDir, ext.command);
    this.opts = { ...defaultSupervision, ...o.supervision, ...ext.supervision };
    this.logger = o.logger;
    this.metrics = pluginMetrics(o.name, o.registry);
    this.parentDeathSignal = o.parentDeathSignal ?? true;
  }

  /** The host's shared part (given, or made on first start); released by close(). */
  private pluginHost(): Promise<PluginHost> {
    this.host ??= PluginHost.create().then((h) => (h.acquire(), h));
    this.host.catch(() => (this.host = undefined));
    return this.host;
  }

  /**
   * Validates the entry and checks the binary (exists, executable, sha256) without running it.
   * Without a sha256 it logs a warning.
   */
  static async activate(o: ExternalPluginOptions): Promise<ExternalPlugin> {
    if (o.builtinNames?.includes(o.name)) {
      throw new ManentError(
        Code.InvalidArgument,
        `plugins.${o.name}: ${o.name} is a built-in plugin; give the external plugin another name (e.g. ${o.name}-ext)`,
        {
          details: { plugin: o.name },
        },
      );
    }
    const { external, config } = o.spec
      ? { external: fromSpec(o.spec.external), config: o.spec.config }
      : parseExternalEntry(o.name, o.entry ?? {});
    const p = new ExternalPlugin(o, external, config);
    await checkBinary(o.name, p.command, external.sha256);
    if (o.host) {
      o.host.acquire();
      p.host = Promise.resolve(o.host);
      p.ownsHost = false;
    }
    if (!external.sha256)
      o.logger.warn("external plugin has no sha256: its binary is not verified", { plugin: o.name, command: p.command });
    return p;
  }

  /** The pid of the running process, if any (tests, diagnostics). */
  pid(): number | undefined {
    return this.live && !this.live.proc.hasExited() ? this.live.proc.pid : undefined;
  }

  /** Where the running process serves gRPC, if it runs (diagnostics, tests). */
  endpoint(): { pid: number; target: string } | undefined {
    const p = this.live?.proc;
    return p && !p.hasExited() ? { pid: p.pid, target: p.target } : undefined;
  }

  /**
   * An operator's restart (`manent plugins restart`): leaves the "gave up" state with a fresh
   * restart budget, replaces a running process (its calls in flight fail as retryable, and their
   * steps retry on the new one) and resolves once the new process has started, or rejects with why
   * it did not.
   */
  async restart(): Promise<PluginSupervision> {
    if (this.closed) throw new ManentError(Code.FailedPrecondition, `plugin ${this.name} is closed`, { details: { plugin: this.name } });
    const live = this.live;
    if (live && !live.proc.hasExited()) {
      // Detached first, so its exit is not counted as a crash nor restarted a second time.
      this.live = undefined;
      clearTimeout(this.pingTimer);
      this.metrics.up(false);
      live.killReason = "was restarted by an operator";
      this.logger.info("external plugin restarted by an operator", { plugin: this.name, pid: live.proc.pid });
      live.proc.kill();
    }
    this.resetBudget();
    this.backoffWake.abort();
    this.backoffWake = new AbortController();
    await this.acquire();
    return this.supervision();
  }

  /** A fresh restart budget, starting at once (an operator's restart, the end of the cool-down). */
  private resetBudget(): void {
    clearTimeout(this.cooldownTimer);
    this.gaveUp = false;
    this.permanentFailure = undefined;
    this.failures = 0;
    this.nextStartAt = 0;
    this.metrics.gaveUp(false);
    this.metrics.consecutiveRestarts(0);
  }

  supervision(): PluginSupervision {
    const running = this.live !== undefined && !this.live.proc.hasExited();
    const status: PluginSupervision["status"] = this.closed
      ? "stopped"
      : this.gaveUp
        ? "gave_up"
        : running
          ? "up"
          : this.starting
            ? this.lastStartAt
              ? "restarting"
              : "starting"
            : this.failures > 0
              ? "start_failed"
              : "not_started";
    return {
      status,
      restarts: this.totalRestarts,
      last_start: this.lastStartAt?.toISOString() ?? null,
      capabilities: this.configured ? protocolCapabilities.filter((c) => this.configured!.capabilities.includes(c)) : null,
      last_error: status === "up" || status === "not_started" || status === "stopped" ? null : (this.lastError ?? null),
    };
  }

  /** Lifetime restarts after a crash or a hung process. */
  restartCount(): number {
    return this.totalRestarts;
  }

  async capabilities(): Promise<Capability[]> {
    await this.acquire();
    // Names this host does not know (a newer SDK), or that the protocol cannot carry, mean nothing to the engine: drop them.
    return protocolCapabilities.filter((c) => this.configured?.capabilities.includes(c));
  }

  async deployer(): Promise<Deployer> {
    const caps = await this.capabilities();
    return remoteDeployer(this.name, caps, (call, run) => this.run(call, run));
  }

  /** Runs a call on the live process, converting failures; a call cut by a crash is Unavailable. */
  private async run<T>(call: string, fn: (p: PluginProcess) => Promise<T>): Promise<T> {
    const live = await this.acquire();
    this.inflight++;
    try {
      return await fn(live.proc);
    } catch (err) {
      if (!isServiceError(err)) throw err;
      const converted = fromServiceError(err, this.name, call);
      if (err.metadata.get("manent-error-bin").length > 0 || converted.code === Code.Unimplemented) throw converted;
      // An error the plugin returned is reported at once; only when the transport failed is the
      // process given a moment to be seen exiting, so the error can say it died.
      if (!live.killReason && !live.proc.hasExited() && !isTransportLoss(err)) throw converted;
      // An exit already seen still says how the process ended (a signal, a code).
      const how = live.killReason
        ? "exited"
        : live.proc.hasExited()
          ? await live.proc.exited
          : await Promise.race([live.proc.exited, sleep(500, undefined)]);
      if (how !== undefined || live.killReason) {
        const what = live.killReason ?? `exited unexpectedly (${how ?? "connection lost"})`;
        // The exit is handled before this line runs (its handler was attached first): if it was the
        // failure too many, no restart is coming and a retry cannot succeed until an operator acts.
        if (this.gaveUp)
          throw new ManentError(
            Code.FailedPrecondition,
            `plugin ${this.name}: process ${what} during ${call}; the supervisor gave up after ${this.failures} consecutive failures ` +
              `and is not restarting it (manent plugins restart ${this.name})`,
            { details: { plugin: this.name, call } },
          );
        throw new ManentError(
          Code.Unavailable,
          `plugin ${this.name}: process ${what} during ${call}; it is being restarted, retry the call`,
          {
            details: { plugin: this.name, call },
          },
        );
      }
      throw converted;
    } finally {
      if (--this.inflight === 0) for (const done of this.idle.splice(0)) done();
    }
  }

  private acquire(): Promise<Live> {
    if (this.closed)
      return Promise.reject(new ManentError(Code.FailedPrecondition, `plugin ${this.name} is closed`, { details: { plugin: this.name } }));
    if (this.gaveUp) return Promise.reject(this.permanentFailure ?? this.gaveUpError());
    const live = this.live;
    // A process the supervisor has just killed (hung): its channel is closed; wait for its exit to be seen, which starts the next one.
    if (live?.killReason && !live.proc.hasExited()) return live.proc.exited.then(() => this.acquire());
    if (live && !live.proc.hasExited()) return Promise.resolve(live);
    this.starting ??= this.start().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private gaveUpError(): ManentError {
    return new ManentError(
      Code.FailedPrecondition,
      `plugin ${this.name}: gave up after ${this.failures} consecutive failures, not restarting it; last error: ${this.lastError ?? "unknown"}`,
      { details: { plugin: this.name } },
    );
  }

  private async start(): Promise<Live> {
    const wait = this.nextStartAt - Date.now();
    if (wait > 0)
      await sleep(wait, undefined, { signal: AbortSignal.any([this.stopSignal.signal, this.backoffWake.signal]) }).catch(() => {});
    if (this.closed) throw new ManentError(Code.FailedPrecondition, `plugin ${this.name} is closed`, { details: { plugin: this.name } });
    let staged: StagedBinary | undefined;
    let proc: PluginProcess | undefined;
    try {
      const host = await this.pluginHost();
      const [stagedBinary, identity] = await Promise.all([host.stage(this.name, this.command, this.ext.sha256), host.identity()]);
      staged = stagedBinary;
      proc = await spawnPlugin({
        identity,
        plugin: this.name,
        binary: staged,
        args: this.ext.args,
        env: this.ext.env,
        cwd: path.dirname(this.command),
        startTimeoutMs: this.ext.startTimeoutMs,
        logger: this.logger,
        parentDeathSignal: this.parentDeathSignal,
        reaper: host.reaper,
        onSpawn: (child) => {
          this.spawning = child;
          // A stop that raced the start: the child must not outlive it.
          if (this.closed) child.kill("SIGKILL");
        },
      });
      this.spawning = undefined;
      if (this.closed)
        throw new ManentError(Code.FailedPrecondition, `plugin ${this.name} was closed while starting`, { details: { plugin: this.name } });
      this.configured = await this.configure(proc);
      const live: Live = { proc, staged };
      this.live = live;
      this.lastStartAt = new Date();
      this.metrics.up(true);
      void proc.exited.then((how) => this.onExit(live, how));
      this.schedulePing(live);
      this.logger.info("external plugin started", {
        plugin: this.name,
        pid: proc.pid,
        capabilities: this.configured.capabilities.join(","),
        secrets_session: this.configured.secretsSession,
      });
      return live;
    } catch (err) {
      this.spawning = undefined;
      proc?.kill();
      if (proc) await proc.exited;
      await staged?.remove();
      const e = ManentError.from(err);
      if (this.closed) throw e;
      if (e.details.reason === magicCookieRefused) this.giveUpAtOnce(e);
      else this.recordFailure(e.message);
      throw e;
    }
  }

  /**
   * Configure: the factory runs in the plugin; its error is the error of this start. It offers the
   * Secrets session (a broker id for the process's life, docs/plugin-protocol.md section 5): a
   * plugin that accepts gets its one ConnInfo right after the answer; one that does not (go-plugin
   * alone, earlier SDKs) never sees that id and gets a broker id per call.
   */
  private async configure(p: PluginProcess): Promise<ConfigureResponse> {
    const configJson = Buffer.from(JSON.stringify(this.config));
    const sessionId = p.broker.newId();
    const prepared = p.secrets.prepareSession();
    prepared.catch(() => {});
    let res: ConfigureResponse;
    try {
      res = await p.deployer
        .configure({ configJson, secretsSessionBrokerId: sessionId }, { deadline: Date.now() + this.ext.startTimeoutMs })
        .catch((err: ServiceError) => Promise.reject(fromServiceError(err, this.name, "Configure")));
    } catch (err) {
      await p.secrets.startSession(prepared, sessionId, false).catch(() => {});
      throw err;
    }
    await p.secrets.startSession(prepared, sessionId, res.secretsSession);
    return res;
  }

  private recordFailure(reason: string): void {
    this.failures++;
    this.lastError = reason;
    this.metrics.consecutiveRestarts(this.failures);
    this.nextStartAt = Date.now() + backoffDelay(this.opts, this.failures);
    if (this.failures > this.opts.maxRestarts && !this.gaveUp) {
      this.gaveUp = true;
      this.metrics.gaveUp(true);
      this.logger.error("external plugin keeps failing, giving up", {
        plugin: this.name,
        failures: this.failures,
        error: reason,
        retry_in_ms: this.opts.cooldownMs,
      });
      if (this.opts.cooldownMs > 0) {
        this.cooldownTimer = setTimeout(() => {
          this.logger.info("external plugin cool-down over: trying again", { plugin: this.name });
          this.resetBudget();
          this.restartInBackground();
        }, this.opts.cooldownMs);
        this.cooldownTimer.unref();
      }
    }
  }

  /** No restart, no cool-down: the same binary fails the same way; an operator's restart tries again. */
  private giveUpAtOnce(e: ManentError): void {
    this.failures++;
    this.lastError = e.message;
    this.gaveUp = true;
    this.permanentFailure = e;
    this.metrics.gaveUp(true);
    this.logger.error("external plugin cannot run, not restarting it", { plugin: this.name, error: e.message });
  }

  private onExit(live: Live, how: string): void {
    if (this.live !== live) {
      void live.staged.remove();
      return;
    }
    this.live = undefined;
    this.metrics.up(false);
    clearTimeout(this.pingTimer);
    void live.staged.remove();
    if (this.closed) return;
    const reason = live.killReason ?? `exited unexpectedly (${how})`;
    this.logger.error("external plugin process ended", { plugin: this.name, pid: live.proc.pid, reason });
    live.proc.closeChannel();
    this.recordFailure(reason);
    if (this.gaveUp) return;
    this.totalRestarts++;
    this.metrics.restarted();
    this.restartInBackground();
  }

  /**
   * Restarts after the backoff; calls meanwhile wait for it. A restart that fails (the process dies
   * again during its start) is retried the same way, until one succeeds or the supervisor gives up:
   * a crash loop ends in the "gave up" state whether the process dies before or after its handshake.
   */
  private restartInBackground(): void {
    this.acquire().catch((err: unknown) => {
      if (this.closed) return;
      this.logger.warn("external plugin restart failed", { plugin: this.name, error: ManentError.from(err).message });
      if (!this.gaveUp) this.restartInBackground();
    });
  }

  private schedulePing(live: Live): void {
    this.pingTimer = setTimeout(() => {
      if (this.live !== live || this.closed) return;
      ping(live.proc, this.opts.pingTimeoutMs).then(
        () => {
          this.failedPings = 0;
          if (++this.healthyPings >= this.opts.healthResetThreshold && this.failures > 0) {
            this.failures = 0;
            this.metrics.consecutiveRestarts(0);
          }
          this.schedulePing(live);
        },
        (err: ServiceError) => {
          this.healthyPings = 0;
          this.metrics.healthCheckFailed();
          if (this.live !== live) return;
          if (++this.failedPings >= this.opts.pingFailureBudget) {
            this.failedPings = 0;
            live.killReason = `was killed after ${this.opts.pingFailureBudget} failed health checks (${err.details || err.message})`;
            this.logger.error("external plugin does not answer health checks, killing it", { plugin: this.name, pid: live.proc.pid });
            live.proc.kill();
            return;
          }
          this.schedulePing(live);
        },
      );
    }, this.opts.pingIntervalMs);
    this.pingTimer.unref();
  }

  /**
   * Stops the plugin: no new calls, running calls finish, then GRPCController.Shutdown, then
   * SIGKILL after the grace period. A start in progress is killed at once.
   */
  close(): Promise<void> {
    // The host's part (private copies, sockets) is let go once the process is gone: a server's
    // shared host is waited for (its shutdown removes its run), a plugin's own is removed at once.
    this.closing ??= this.doClose().finally(() => this.host?.then((h) => (this.ownsHost ? h.releaseNow() : h.release())).catch(() => {}));
    return this.closing;
  }

  private async doClose(): Promise<void> {
    this.closed = true;
    this.stopSignal.abort();
    clearTimeout(this.pingTimer);
    clearTimeout(this.cooldownTimer);
    this.spawning?.kill("SIGKILL");
    await this.starting?.catch(() => {});
    if (this.inflight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    const live = this.live;
    if (!live) return;
    const p = live.proc;
    if (!p.hasExited() && !live.killReason) {
      await p.controller.shutdown({}, { deadline: Date.now() + this.opts.shutdownGraceMs }).catch(() => {});
      const exited = await Promise.race([p.exited.then(() => true), sleep(this.opts.shutdownGraceMs, false)]);
      if (!exited) {
        this.logger.warn("external plugin did not exit after Shutdown, killing it", { plugin: this.name, pid: p.pid });
      }
    }
    p.kill();
    await p.exited;
    this.live = undefined;
    this.metrics.up(false);
    await live.staged.remove();
  }
}

function isServiceError(err: unknown): err is ServiceError {
  return typeof err === "object" && err !== null && "code" in err && "metadata" in err && typeof (err as ServiceError).code === "number";
}
