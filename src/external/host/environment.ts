import { ENV, MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, APP_PROTOCOL_VERSION } from "../protocol/constants.js";

/** The host variables a plugin inherits; nothing else, since the host's may hold secrets. */
export const inheritedVariables = ["PATH", "HOME", "TMPDIR", "TZ", "LANG"] as const;

/** go-plugin's default port range for TCP plugins. */
const minPort = 10_000;
const maxPort = 25_000;

/**
 * The complete environment of a plugin process: the inherited variables, `external.env`, then
 * go-plugin's handshake variables (last, so configuration cannot override them).
 */
export function pluginEnvironment(
  host: NodeJS.ProcessEnv,
  configured: Record<string, string>,
  clientCertPem: string,
  socketDir: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of inheritedVariables) {
    const v = host[k];
    if (v !== undefined) env[k] = v;
  }
  Object.assign(env, configured);
  env[MAGIC_COOKIE_KEY] = MAGIC_COOKIE_VALUE;
  env[ENV.protocolVersions] = String(APP_PROTOCOL_VERSION);
  env[ENV.minPort] = String(minPort);
  env[ENV.maxPort] = String(maxPort);
  env[ENV.clientCert] = clientCertPem;
  env[ENV.unixSocketDir] = socketDir;
  return env;
}
