/**
 * manent's end-user API: run a server, talk to one, read configuration. Plugin authors use
 * `manent/plugin` (the contract) and `manent/sdk` (serve a plugin as an external binary).
 */
export { serve, type RunningServer, type ServeOptions } from "./server/server.js";
export { ApiClient } from "./cli/api-client.js";
export { loadManentConfig, type LoadedConfig, type Descriptor, type Envconfig } from "./core/config/index.js";
export type { DeployRecord, DeployStatus, DeployKind, StepRecord, TargetProgress } from "./core/engine/deploy-store.js";
export { Code, ManentError, type ErrorJSON } from "./core/errors.js";
export { version } from "./version.js";
