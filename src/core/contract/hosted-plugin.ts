import type { Capability, Deployer } from "./deployer.js";

/**
 * A configured plugin as the engine sees it, built in or external. For an external plugin the
 * process starts on the first call of `capabilities()` or of a deployer method, never before.
 */
export interface HostedPlugin {
  readonly name: string;
  readonly kind: "builtin" | "external";
  /** The optional interfaces the plugin implements (an external plugin learns them at Configure). */
  capabilities(): Promise<Capability[]>;
  /** The deployer; for an external plugin a proxy whose calls go over gRPC. */
  deployer(): Promise<Deployer>;
  /** Stops what the plugin runs (an external process) after its running calls finish. */
  close(): Promise<void>;
  /** External plugins: how their process fares, for operators (never starts it). */
  supervision?(): PluginSupervision;
  /**
   * External plugins: an operator's restart. Leaves the "gave up" state with a fresh restart
   * budget, replaces a running process and resolves once the new one has started.
   */
  restart?(): Promise<PluginSupervision>;
}

/** The supervisor's view of an external plugin's process. */
export interface PluginSupervision {
  /**
   * `not_started` until first use; `starting` during the first start; `up` while a process runs;
   * `restarting` after a crash or a hung process, until the new one is up; `start_failed` when the
   * last start failed and nothing is starting (the next use tries again, after the backoff);
   * `gave_up` until an operator restart or the cool-down; `stopped` once the server closed it.
   */
  status: "not_started" | "starting" | "up" | "restarting" | "start_failed" | "gave_up" | "stopped";
  /** Restarts after a crash or a hung process, since the server started. */
  restarts: number;
  /** When the running (or last) process finished its handshake. */
  last_start: string | null;
  /** What the running (or last) process announced at Configure; null before any start succeeded. */
  capabilities: Capability[] | null;
  /** Why the last start or process failed, while that is the state (start_failed, restarting, gave_up). */
  last_error: string | null;
}

/** A plugin as the API lists it (GET /api/v1/plugins): one type for the server, the CLI and the web UI. */
export interface PluginListing extends Partial<Omit<PluginSupervision, "capabilities">> {
  name: string;
  kind: "builtin" | "external";
  capabilities: string[] | null;
  capabilities_as_of?: string | null;
}
