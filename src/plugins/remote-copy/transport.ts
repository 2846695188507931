/** What a command run on a target returned. */
export interface ExecResult {
  /** Exit status; null when the command was killed by a signal or the channel closed without one. */
  code: number | null;
  signal?: string;
  stdout: string;
  stderr: string;
}

/**
 * How the plugin reaches one target: run a POSIX shell script there and put a local file there.
 * The release logic is written once against this, for both the local and the SSH transport.
 */
export interface Transport {
  /** Runs `script` with `sh -c` on the target; a non-zero exit is a result, not an error. */
  exec(script: string, options?: { timeoutMs?: number }): Promise<ExecResult>;
  /** Copies the local file to `remotePath` on the target; returns the bytes sent. */
  upload(localPath: string, remotePath: string, onProgress?: (sent: number, total: number) => void): Promise<number>;
  /** Releases the connection; safe to call twice. */
  close(): Promise<void>;
}
