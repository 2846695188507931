import ssh2 from "ssh2";
import type { ClientChannel, SFTPWrapper } from "ssh2";
import type { Duplex } from "node:stream";
import { Code, ManentError } from "../../core/errors.js";
import { verifyHostKey, type HostKeyPolicy } from "./host-key.js";
import { appendCapped, sq } from "./shell.js";
import type { ExecResult, Transport } from "./transport.js";

const { Client } = ssh2;
type Client = InstanceType<typeof Client>;

export interface SshOptions {
  host: string;
  port: number;
  user: string;
  privateKey: string;
  passphrase?: string;
  hostKeys: HostKeyPolicy;
  /** A bastion reached with the same user and key; the target is reached through it. */
  jump?: { host: string; port: number };
  connectTimeoutMs: number;
  /** Aborting closes the connection at once; pending calls fail with `canceled`. */
  signal: AbortSignal;
}

/** SFTP status codes (draft-ietf-secsh-filexfer-02) that mean something to the caller. */
const SFTP_PERMISSION_DENIED = 3;
const SFTP_FAILURE = 4;

/**
 * One SSH connection to one host (through the jump host when set): commands run over exec
 * channels, files go over one SFTP session. Host keys are always verified.
 */
export class SshTransport implements Transport {
  private sftpSession?: Promise<SFTPWrapper>;
  private readonly onAbort = (): void => {
    this.destroy();
  };
  /**
   * Rejects when the connection goes away. ssh2 leaves a running fastPut pending forever when
   * the socket dies, so every operation races against this.
   */
  private readonly gone: Promise<never>;

  private constructor(
    private readonly client: Client,
    private readonly jumpClient: Client | undefined,
    private readonly label: string,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener("abort", this.onAbort, { once: true });
    this.gone = new Promise<never>((_, reject) => {
      const onGone = (): void => reject(this.signal.aborted ? cancelled(label) : lost(label, "working on the host"));
      client.once("close", onGone);
      jumpClient?.once("close", onGone);
    });
    // Nobody may be waiting when the connection closes normally.
    this.gone.catch(() => undefined);
  }

  /** Connects and authenticates; errors are classified (see {@link classifyConnectError}). */
  static async connect(opts: SshOptions): Promise<SshTransport> {
    const label = `${opts.user}@${opts.host}:${opts.port}`;
    if (opts.signal.aborted) throw cancelled(label);
    let jumpClient: Client | undefined;
    try {
      let sock: Duplex | undefined;
      if (opts.jump) {
        jumpClient = await openClient(opts, opts.jump.host, opts.jump.port);
        sock = await forward(jumpClient, opts, label);
      }
      const client = await openClient(opts, opts.host, opts.port, sock);
      if (opts.signal.aborted) {
        await closeClient(client, true);
        throw cancelled(label);
      }
      return new SshTransport(client, jumpClient, label, opts.signal);
    } catch (err) {
      if (jumpClient) await closeClient(jumpClient, true);
      throw err;
    }
  }

  exec(script: string, options?: { timeoutMs?: number }): Promise<ExecResult> {
    if (this.signal.aborted) return Promise.reject(cancelled(this.label));
    return this.race(
      new Promise((resolve, reject) => {
        const onChannel = (err: Error | undefined, stream: ClientChannel): void => {
          if (err) return reject(this.lostOr(err, "opening a command channel"));
          let stdout = "";
          let stderr = "";
          let exit: { code: number | null; signal?: string } | undefined;
          let timedOut = false;
          const timer =
            options?.timeoutMs === undefined
              ? undefined
              : setTimeout(() => {
                  timedOut = true;
                  stream.close();
                }, options.timeoutMs);
          stream.setEncoding("utf8").on("data", (d: string) => (stdout = appendCapped(stdout, d)));
          stream.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = appendCapped(stderr, d)));
          stream.on("exit", (code: number | null, signal?: string) => {
            exit = { code, ...(signal ? { signal } : {}) };
          });
          stream.on("close", () => {
            clearTimeout(timer);
            if (this.signal.aborted) return reject(cancelled(this.label));
            if (timedOut) {
              return reject(new ManentError(Code.DeadlineExceeded, `${this.label}: command did not finish in ${options?.timeoutMs} ms`));
            }
            // No exit status: the connection went away under the command.
            if (!exit) return reject(lost(this.label, "running a command"));
            resolve({ ...exit, stdout, stderr });
          });
        };
        try {
          this.client.exec(`sh -c ${sq(script)}`, onChannel);
        } catch (err) {
          reject(this.lostOr(err as Error, "opening a command channel"));
        }
      }),
    );
  }

  private race<T>(op: Promise<T>): Promise<T> {
    op.catch(() => undefined);
    return Promise.race([op, this.gone]);
  }

  async upload(localPath: string, remotePath: string, onProgress?: (sent: number, total: number) => void): Promise<number> {
    if (this.signal.aborted) throw cancelled(this.label);
    const sftp = await this.sftp();
    let total = 0;
    const put = new Promise<void>((resolve, reject) => {
      sftp.fastPut(
        localPath,
        remotePath,
        {
          concurrency: 64,
          chunkSize: 32 * 1024,
          step: (sent, _chunk, size) => {
            total = size;
            onProgress?.(sent, size);
          },
        },
        (err) => (err ? reject(this.sftpError(err, remotePath)) : resolve()),
      );
    });
    await this.race(put);
    return total;
  }

  async close(): Promise<void> {
    this.signal.removeEventListener("abort", this.onAbort);
    await closeClient(this.client, false);
    if (this.jumpClient) await closeClient(this.jumpClient, false);
  }

  private destroy(): void {
    this.client.destroy();
    this.jumpClient?.destroy();
  }

  private sftp(): Promise<SFTPWrapper> {
    this.sftpSession ??= this.race(
      new Promise((resolve, reject) => {
        try {
          this.client.sftp((err, sftp) => (err ? reject(this.lostOr(err, "opening SFTP")) : resolve(sftp)));
        } catch (err) {
          reject(this.lostOr(err as Error, "opening SFTP"));
        }
      }),
    );
    return this.sftpSession;
  }

  /** SFTP tells permission problems apart; a full disk is a generic failure (the caller checks df). */
  private sftpError(err: Error & { code?: unknown }, path: string): ManentError {
    if (this.signal.aborted) return cancelled(this.label);
    if (err.code === SFTP_PERMISSION_DENIED) {
      return new ManentError(Code.PermissionDenied, `${this.label}: permission denied writing ${path}`, { cause: err });
    }
    if (err.code === SFTP_FAILURE) {
      return new ManentError(Code.Internal, `${this.label}: SFTP write of ${path} failed: ${err.message}`, { cause: err });
    }
    return lost(this.label, `uploading ${path} (${err.message})`, err);
  }

  private lostOr(err: Error, doing: string): ManentError {
    return this.signal.aborted ? cancelled(this.label) : lost(this.label, `${doing} (${err.message})`, err);
  }
}

/** Opens and authenticates one SSH client over a new TCP socket or `sock` (a jump-host tunnel). */
function openClient(opts: SshOptions, host: string, port: number, sock?: Duplex): Promise<Client> {
  const label = `${opts.user}@${host}:${port}`;
  return new Promise((resolve, reject) => {
    const client = new Client();
    let hostKeyProblem: string | undefined;
    let settled = false;
    const onAbort = (): void => {
      client.destroy();
    };
    opts.signal.addEventListener("abort", onAbort, { once: true });
    const settle = (err?: ManentError): void => {
      if (settled) return;
      settled = true;
      opts.signal.removeEventListener("abort", onAbort);
      if (err) {
        client.destroy();
        reject(err);
      } else {
        resolve(client);
      }
    };
    client.on("ready", () => settle());
    client.on("error", (err: Error & { level?: string }) => settle(classifyConnectError(err, label, hostKeyProblem, opts)));
    client.on("close", () => settle(opts.signal.aborted ? cancelled(label) : lost(label, "connecting")));
    try {
      connect();
    } catch (err) {
      // ssh2 parses the key synchronously; its message names the problem, never the key.
      const msg = err instanceof Error ? err.message : String(err);
      settle(new ManentError(Code.InvalidArgument, `${label}: unusable private key: ${msg}`, { cause: err }));
    }
    function connect(): void {
      client.connect({
        host,
        port,
        ...(sock ? { sock } : {}),
        username: opts.user,
        privateKey: opts.privateKey,
        ...(opts.passphrase !== undefined ? { passphrase: opts.passphrase } : {}),
        readyTimeout: opts.connectTimeoutMs,
        keepaliveInterval: 15_000,
        hostVerifier: (key: Buffer) => {
          const verdict = verifyHostKey(opts.hostKeys, host, port, key);
          if (!verdict.ok) hostKeyProblem = verdict.reason;
          return verdict.ok;
        },
      });
    }
  });
}

/** A TCP tunnel from the jump host to the target. */
function forward(jump: Client, opts: SshOptions, label: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    jump.forwardOut("127.0.0.1", 0, opts.host, opts.port, (err, stream) => {
      if (err) reject(new ManentError(Code.Unavailable, `${label}: jump host cannot reach the target: ${err.message}`, { cause: err }));
      else resolve(stream);
    });
  });
}

/**
 * Host-key problems and refused logins are permanent (a retry meets the same key); everything
 * else on the way in (refused, reset, timed out, DNS) may pass and is `unavailable`.
 */
export function classifyConnectError(
  err: Error & { level?: string },
  label: string,
  hostKeyProblem: string | undefined,
  opts: Pick<SshOptions, "signal" | "connectTimeoutMs">,
): ManentError {
  if (opts.signal.aborted) return cancelled(label);
  if (hostKeyProblem !== undefined) {
    return new ManentError(Code.Aborted, `${label}: ${hostKeyProblem}`, {
      cause: err,
      details: { host: label },
    });
  }
  if (err.level === "client-authentication") {
    return new ManentError(Code.Unauthenticated, `${label}: authentication refused (check the user and the key)`, {
      cause: err,
      details: { host: label },
    });
  }
  if (err.level === "client-timeout") {
    return new ManentError(Code.Unavailable, `${label}: no SSH session within ${opts.connectTimeoutMs} ms`, { cause: err });
  }
  return lost(label, "connecting", err);
}

/** Waits for the client's `close` so callers know the socket is gone; `hard` skips the SSH goodbye. */
function closeClient(client: Client, hard: boolean): Promise<void> {
  return new Promise((resolve) => {
    const sock = (client as unknown as { _sock?: { destroyed?: boolean } })._sock;
    if (!sock || sock.destroyed) return resolve();
    // A server that never answers the goodbye must not hold the call: cut the socket after 5 s.
    const timer = setTimeout(() => client.destroy(), 5000);
    client.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
    if (hard) client.destroy();
    else client.end();
  });
}

function lost(label: string, doing: string, cause?: unknown): ManentError {
  const reason = cause instanceof Error ? `: ${cause.message}` : "";
  return new ManentError(Code.Unavailable, `${label}: connection failed while ${doing}${reason}`, {
    ...(cause !== undefined ? { cause } : {}),
    details: { host: label },
  });
}

function cancelled(label: string): ManentError {
  return new ManentError(Code.Canceled, `${label}: cancelled`);
}
