import { ManentError } from "../../core/errors.js";
import type { Request, Target } from "../../core/contract/index.js";
import { LocalTransport } from "./local-transport.js";
import type { Params } from "./params.js";
import { SshTransport } from "./ssh-transport.js";
import type { Transport } from "./transport.js";
import type { HostKeyPolicy } from "./host-key.js";

/** The secrets an SSH call needs, read once per plugin call. */
export interface SshSecrets {
  privateKey: string;
  passphrase?: string;
  hostKeys: HostKeyPolicy;
}

/** Reads the secrets named by the params; a failure names the secret and the param, never a value. */
export async function readSshSecrets(params: Params, req: Pick<Request, "secrets">): Promise<SshSecrets> {
  const read = async (name: string, param: string): Promise<string> => {
    try {
      return await req.secrets.secret(name);
    } catch (err) {
      const e = ManentError.from(err);
      throw new ManentError(e.code, `remote-copy: secret "${name}" (param ${param}): ${e.message}`, {
        cause: err,
        details: { plugin: "remote-copy", param, secret: name },
      });
    }
  };
  const privateKey = await read(params.ssh_key_secret, "ssh_key_secret");
  const passphrase = params.ssh_passphrase_secret ? await read(params.ssh_passphrase_secret, "ssh_passphrase_secret") : undefined;
  const knownHosts = params.known_hosts_secret ? await read(params.known_hosts_secret, "known_hosts_secret") : undefined;
  return {
    privateKey,
    ...(passphrase !== undefined ? { passphrase } : {}),
    hostKeys: {
      ...(knownHosts !== undefined ? { knownHosts } : {}),
      ...(params.host_key_fingerprint ? { fingerprints: params.host_key_fingerprint } : {}),
    },
  };
}

/** Opens the one connection a call uses for a target. */
export async function openTransport(
  params: Params,
  secrets: SshSecrets | undefined,
  target: Target,
  signal: AbortSignal,
): Promise<Transport> {
  if (params.transport === "local" || !secrets) return new LocalTransport(signal);
  const jump = params.jump_host ? splitHostPort(params.jump_host) : undefined;
  return SshTransport.connect({
    host: target.host,
    port: target.port ?? 22,
    user: params.user!,
    privateKey: secrets.privateKey,
    ...(secrets.passphrase !== undefined ? { passphrase: secrets.passphrase } : {}),
    hostKeys: secrets.hostKeys,
    ...(jump ? { jump } : {}),
    connectTimeoutMs: params.connect_timeout,
    signal,
  });
}

function splitHostPort(value: string): { host: string; port: number } {
  const i = value.lastIndexOf(":");
  return { host: value.slice(0, i), port: Number(value.slice(i + 1)) };
}
