import { spawn, type ChildProcess } from "node:child_process";
import { copyFile, stat } from "node:fs/promises";
import { Code, ManentError } from "../../core/errors.js";
import { appendCapped } from "./shell.js";
import type { ExecResult, Transport } from "./transport.js";

/**
 * The worker's own filesystem as a target: scripts run with the local `sh`, uploads are file
 * copies. Used for single-machine setups and to test the release logic without SSH.
 */
export class LocalTransport implements Transport {
  private readonly running = new Set<ChildProcess>();
  private readonly onAbort = (): void => {
    for (const child of this.running) child.kill("SIGKILL");
  };

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener("abort", this.onAbort, { once: true });
  }

  exec(script: string, options?: { timeoutMs?: number }): Promise<ExecResult> {
    if (this.signal.aborted) return Promise.reject(cancelled());
    return new Promise((resolve, reject) => {
      // detached: a timeout kills the whole process group, not only sh.
      const child = spawn("sh", ["-c", script], {
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      this.running.add(child);
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout = appendCapped(stdout, d)));
      child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = appendCapped(stderr, d)));
      const timer =
        options?.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              try {
                process.kill(-child.pid!, "SIGKILL");
              } catch {
                child.kill("SIGKILL");
              }
            }, options.timeoutMs);
      child.on("error", (err) => {
        clearTimeout(timer);
        this.running.delete(child);
        reject(
          new ManentError(Code.Internal, `cannot run sh: ${err.message}`, {
            cause: err,
          }),
        );
      });
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        this.running.delete(child);
        if (this.signal.aborted) return reject(cancelled());
        resolve({ code, ...(signal ? { signal } : {}), stdout, stderr });
      });
    });
  }

  async upload(localPath: string, remotePath: string, onProgress?: (sent: number, total: number) => void): Promise<number> {
    if (this.signal.aborted) throw cancelled();
    const { size } = await stat(localPath);
    try {
      await copyFile(localPath, remotePath);
    } catch (err) {
      throw uploadError(err);
    }
    onProgress?.(size, size);
    return size;
  }

  async close(): Promise<void> {
    this.signal.removeEventListener("abort", this.onAbort);
  }
}

/** Same codes as the SSH transport's: full disk = resource_exhausted, no permission = permission_denied. */
function uploadError(err: unknown): ManentError {
  const errno = (err as NodeJS.ErrnoException).code;
  const message = err instanceof Error ? err.message : String(err);
  if (errno === "ENOSPC" || errno === "EDQUOT") return new ManentError(Code.ResourceExhausted, message, { cause: err });
  if (errno === "EACCES" || errno === "EPERM" || errno === "EROFS") {
    return new ManentError(Code.PermissionDenied, message, { cause: err });
  }
  return new ManentError(Code.Internal, message, { cause: err });
}

function cancelled(): ManentError {
  return new ManentError(Code.Canceled, "remote-copy: cancelled");
}
