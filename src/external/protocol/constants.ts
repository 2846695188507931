/**
 * The fixed values of the manent plugin protocol (docs/plugin-protocol.md). Host and every SDK
 * (TypeScript here, Go in sdk/go) must agree on them.
 */

/** go-plugin's magic cookie: a plugin refuses to run without it (it was started by hand). */
export const MAGIC_COOKIE_KEY = "MANENT_PLUGIN";
export const MAGIC_COOKIE_VALUE = "manent-deployer-plugin-6c1e0b";

/** go-plugin's own protocol version (the first handshake field). */
export const CORE_PROTOCOL_VERSION = 1;
/** manent's application protocol version (external.ProtocolVersion, the second field). */
export const APP_PROTOCOL_VERSION = 1;

/** The service name go-plugin's health check asks for. */
export const HEALTH_SERVICE = "plugin";

/** Binary trailer carrying a serialized ErrorDetail on a failed call. */
export const ERROR_TRAILER = "manent-error-bin";

/** How long a broker side waits for the other side's connection info, as go-plugin does. */
export const BROKER_DIAL_TIMEOUT_MS = 5_000;

/** Environment variables go-plugin's host passes to the plugin. */
export const ENV = {
  protocolVersions: "PLUGIN_PROTOCOL_VERSIONS",
  minPort: "PLUGIN_MIN_PORT",
  maxPort: "PLUGIN_MAX_PORT",
  clientCert: "PLUGIN_CLIENT_CERT",
  unixSocketDir: "PLUGIN_UNIX_SOCKET_DIR",
} as const;
