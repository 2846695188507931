import { connect, type Socket } from "node:net";
import { Code, ManentError } from "../../../core/errors.js";

/**
 * A client of HAProxy's runtime API (the `stats socket … level admin` of haproxy.cfg), in its
 * non-interactive mode: one connection per command, HAProxy answers and closes. Changes made
 * here apply at once to new connections, with no reload; they are lost when HAProxy restarts
 * (keep a `server-state-file` for that).
 */
export interface RuntimeAddress {
  /** A unix socket path, or a TCP host and port (`stats socket ipv4@127.0.0.1:9999`). */
  path?: string;
  host?: string;
  port?: number;
}

/** Parses the `haproxy_socket` param: an absolute unix socket path or `host:port`. */
export function parseRuntimeAddress(value: string): RuntimeAddress | undefined {
  if (value.startsWith("/")) return value.split("/").includes("..") ? undefined : { path: value };
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(value);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

/** Backend and server names as haproxy.cfg allows them; nothing that could end a command. */
export const haproxyNamePattern = /^[A-Za-z0-9_.:-]{1,100}$/;

/** One server's line of `show stat`: what the rollout reads back. */
export interface ServerStat {
  backend: string;
  server: string;
  /** Current sessions: connections the server is handling now. */
  scur: number;
  /** `UP`, `DOWN`, `DRAIN`, `MAINT`, `no check`… */
  status: string;
  weight: number;
}

export class HaproxyRuntime {
  constructor(
    private readonly address: RuntimeAddress,
    private readonly timeoutMs = 10_000,
  ) {}

  /** Where the API is, for messages. */
  describe(): string {
    return this.address.path ?? `${this.address.host}:${this.address.port}`;
  }

  /** Runs one command and returns HAProxy's answer, trailing blank line removed. */
  async command(cmd: string, signal?: AbortSignal): Promise<string> {
    if (/[\n\r;]/.test(cmd)) throw new ManentError(Code.Internal, `haproxy: refusing a command with a separator: ${cmd}`);
    return new Promise<string>((resolve, reject) => {
      const socket: Socket = this.address.path
        ? connect({ path: this.address.path })
        : connect({ host: this.address.host!, port: this.address.port! });
      let out = "";
      let settled = false;
      const finish = (err?: ManentError): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        socket.destroy();
        if (err) reject(err);
        else resolve(out.replace(/\n+$/, ""));
      };
      const onAbort = (): void => finish(new ManentError(Code.Canceled, `haproxy: cancelled: ${cmd}`));
      const timer = setTimeout(
        () =>
          finish(
            new ManentError(
              Code.Unavailable,
              `haproxy runtime API at ${this.describe()} did not answer "${cmd}" within ${this.timeoutMs} ms`,
              {
                details: { haproxy_socket: this.describe() },
              },
            ),
          ),
        this.timeoutMs,
      );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      socket.setEncoding("utf8");
      socket.on("connect", () => socket.end(`${cmd}\n`));
      socket.on("data", (d: string) => {
        out += d;
        if (out.length > 8 * 1024 * 1024) finish(new ManentError(Code.Internal, `haproxy: answer to "${cmd}" is larger than 8 MiB`));
      });
      socket.on("end", () => finish());
      socket.on("close", () => finish());
      socket.on("error", (err: NodeJS.ErrnoException) => finish(this.connectError(err)));
    });
  }

  /** Runs a command that answers nothing on success (`set server …`); any answer is its error. */
  async set(cmd: string, signal?: AbortSignal): Promise<void> {
    const answer = (await this.command(cmd, signal)).trim();
    if (answer === "") return;
    // HAProxy's answers to a bad name or value ("No such server.", "No such backend.", weights
    // out of range, a static algorithm) describe the configuration: a retry cannot fix them.
    throw new ManentError(Code.FailedPrecondition, `haproxy at ${this.describe()} refused "${cmd}": ${answer}`, {
      details: { haproxy_socket: this.describe(), command: cmd },
    });
  }

  /** The current weight of a server (`get weight`). */
  async weight(backend: string, server: string, signal?: AbortSignal): Promise<number> {
    const answer = await this.command(`get weight ${backend}/${server}`, signal);
    const m = /^(\d+) \(initial \d+\)/.exec(answer.trim());
    if (!m) {
      throw new ManentError(Code.FailedPrecondition, `haproxy at ${this.describe()}: get weight ${backend}/${server}: ${answer.trim()}`, {
        details: { haproxy_socket: this.describe() },
      });
    }
    return Number(m[1]);
  }

  /** Every server's stats line (`show stat -1 4 -1`: all proxies, servers only). */
  async serverStats(signal?: AbortSignal): Promise<ServerStat[]> {
    const answer = await this.command("show stat -1 4 -1", signal);
    const lines = answer.split("\n").filter((l) => l !== "");
    const header = lines[0]?.replace(/^# /, "").split(",") ?? [];
    const col = (name: string): number => header.indexOf(name);
    const [pxname, svname, scur, status, weight] = ["pxname", "svname", "scur", "status", "weight"].map(col);
    if ([pxname, svname, scur, status, weight].some((i) => i === undefined || i < 0)) {
      throw new ManentError(Code.Unavailable, `haproxy at ${this.describe()}: unexpected "show stat" answer: ${lines[0] ?? "(empty)"}`);
    }
    return lines.slice(1).map((line) => {
      const f = line.split(",");
      return {
        backend: f[pxname!] ?? "",
        server: f[svname!] ?? "",
        scur: Number(f[scur!] ?? 0),
        status: f[status!] ?? "",
        weight: Number(f[weight!] ?? 0),
      };
    });
  }

  private connectError(err: NodeJS.ErrnoException): ManentError {
    const where = this.describe();
    const details = { haproxy_socket: where };
    if (err.code === "EACCES" || err.code === "EPERM") {
      return new ManentError(Code.PermissionDenied, `haproxy runtime API ${where}: permission denied (${err.message})`, { details });
    }
    // A missing socket or a refused connection: HAProxy restarting or not started yet, worth a retry.
    return new ManentError(Code.Unavailable, `haproxy runtime API ${where} is unreachable: ${err.message}`, { details, cause: err });
  }
}
