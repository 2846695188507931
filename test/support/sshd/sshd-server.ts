import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { descendants } from "./processes.js";
import type { KeyPair } from "./keys.js";

export const sshdPath = "/usr/sbin/sshd";

export interface SshdOptions {
  /** Loopback address the server listens on: each server acts as a distinct host. */
  host: string;
  dir: string;
  hostKeyPath: string;
  hostKey: KeyPair;
  authorizedKeysPath: string;
  user: string;
}

/**
 * One real OpenSSH server in the foreground (`-D -e`), on a free port, with its own generated
 * config. `kill()` SIGKILLs it and every per-connection child; `start()` brings it back on the
 * same address, port and host key.
 */
export class SshdServer {
  port = 0;
  private child?: ChildProcess;
  private exited?: Promise<void>;
  private readonly configPath: string;
  /** Everything sshd logged, for assertion messages. */
  log = "";

  constructor(readonly opts: SshdOptions) {
    this.configPath = join(opts.dir, "sshd_config");
  }

  get host(): string {
    return this.opts.host;
  }

  /** The known_hosts line for this server. */
  get knownHostsLine(): string {
    const [type, blob] = this.opts.hostKey.publicKey.split(" ");
    return `[${this.host}]:${this.port} ${type} ${blob}`;
  }

  get fingerprint(): string {
    return this.opts.hostKey.fingerprint;
  }

  async start(): Promise<void> {
    if (this.port === 0) {
      this.port = await freePort(this.host);
      await writeFile(this.configPath, this.config());
    }
    // sshd refuses to start without its privilege-separation directory.
    if (!existsSync("/run/sshd")) mkdirSync("/run/sshd", { mode: 0o755, recursive: true });
    const child = spawn(sshdPath, ["-D", "-e", "-f", this.configPath], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    await new Promise<void>((resolve, reject) => {
      child.stderr!.setEncoding("utf8").on("data", (d: string) => {
        this.log += d;
        if (this.log.includes(`Server listening on ${this.host} port ${this.port}`)) resolve();
      });
      child.once("exit", (code) => reject(new Error(`sshd on ${this.host}:${this.port} exited (${code}): ${this.log}`)));
      child.once("error", reject);
    });
  }

  /** SIGKILL to the listener and every session process: the host vanishes mid-transfer. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    for (const pid of [child.pid!, ...descendants(child.pid!)]) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await this.exited;
  }

  async stop(): Promise<void> {
    await this.kill();
  }

  private config(): string {
    return [
      `Port ${this.port}`,
      `ListenAddress ${this.host}`,
      `HostKey ${this.opts.hostKeyPath}`,
      "PidFile none",
      "UsePAM no",
      // The test dirs live under /tmp (world-writable), which StrictModes would reject.
      "StrictModes no",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PubkeyAuthentication yes",
      `AuthorizedKeysFile ${this.opts.authorizedKeysPath}`,
      "PermitRootLogin no",
      `AllowUsers ${this.opts.user}`,
      "AllowTcpForwarding yes",
      "MaxStartups 100",
      "MaxSessions 50",
      "Subsystem sftp /usr/lib/openssh/sftp-server",
      "LogLevel INFO",
      "",
    ].join("\n");
  }
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}
