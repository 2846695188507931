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
  /** `not_started` until first use; `restarting` after a crash or a hung process; `gave_up` until an operator restart or the cool-down. */
  status: "not_started" | "up" | "restarting" | "gave_up" | "stopped";
  /** Restarts after a crash or a hung process, since the server started. */
  restarts: number;
  /** When the running (or last) process finished its handshake. */
  last_start: string | null;
}
