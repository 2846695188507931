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
}
