import type { LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { isLoopbackHost } from "../../core/net/loopback.js";

/** `listen` split into what `server.listen` takes; an empty host is every interface. */
export function parseListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(":");
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, "") || "0.0.0.0", port: Number(listen.slice(i + 1)) };
}

/**
 * Refuses plain HTTP on an address other than loopback: tokens and sign-in sessions would cross
 * the network in clear. Allowed when manent serves TLS itself or manent.yml declares a TLS proxy in front.
 */
export function refusePlaintextOnNetwork(config: LoadedConfig, listenFromFlag: boolean): void {
  if (config.tls?.cert_file !== undefined || config.tls?.behind_proxy === true) return;
  if (isLoopbackHost(parseListen(config.listen).host)) return;
  const where = listenFromFlag ? `--listen ${config.listen}` : `listen: ${config.listen}`;
  throw new ManentError(
    Code.InvalidArgument,
    `${config.file}: tls: ${where} is not a loopback address and no tls is configured, so tokens and sessions would cross the network in clear. ` +
      `Set tls.cert_file and tls.key_file (manent-server serves HTTPS), or, if a TLS-terminating proxy is in front of this server, ` +
      `declare it with tls: {behind_proxy: true}`,
    { details: { file: config.file, field: "tls" } },
  );
}
