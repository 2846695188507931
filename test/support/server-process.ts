import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter, once } from "node:events";
import { fileURLToPath } from "node:url";
import { buildDist, distIsStale } from "../../scripts/build-js.mjs";
import { ApiClient } from "../../src/cli/api-client.js";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
export const serverBin = `${repoRoot}bin/manent-server.js`;
export const cliBin = `${repoRoot}bin/manent.js`;

// The binaries run dist/: a test file run on its own right after an edit under src/ (without
// scripts/test.sh, which builds first) still spawns the code it tests.
if (distIsStale()) await buildDist();

export interface ServerProcess {
  url: string;
  api: ApiClient;
  child: ChildProcess;
  /** Everything the server wrote to stderr (its JSON log). */
  logs(): string;
  /** Resolves when the log (from `from` on) has a line matching `line`; rejects if the server exits first. */
  logged(line: RegExp, from?: number): Promise<string>;
  /** Resolves with the exit code or signal when the process ends. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM and wait (graceful shutdown). */
  stop(): Promise<void>;
  kill(): Promise<void>;
}

/**
 * The servers this process started and that still run: killed when it exits, so that a test file
 * or bench that fails halfway leaves none behind (one left without its Postgres kept a third of a
 * CPU busy and slowed every later run on the machine).
 */
const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/**
 * Starts a real `manent-server serve` process on a free port and resolves when it prints its
 * address. Rejects with the server's stderr if it exits before listening.
 */
export async function startServer(
  configFile: string,
  opts: {
    cwd: string;
    env?: Record<string, string>;
    token?: string;
    /** false keeps manent.yml's listen. */ freePort?: boolean;
    /** The transport of `api`, e.g. one trusting a test CA (src/cli/tls-transport.ts). */ fetch?: typeof fetch;
    /** Another checkout's bin/manent-server.js (a bench comparing with an earlier commit); default this one's. */ bin?: string;
  } = {
    cwd: process.cwd(),
  },
): Promise<ServerProcess> {
  const listen = opts.freePort === false ? [] : ["--listen", "127.0.0.1:0"];
  const child = spawn(process.execPath, [opts.bin ?? serverBin, "-c", configFile, "serve", ...listen], {
    cwd: opts.cwd,
    env: { ...process.env, MANENT_LOG_LEVEL: process.env.MANENT_LOG_LEVEL ?? "debug", ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let stderr = "";
  const log = new EventEmitter();
  child.stderr!.on("data", (d: Buffer) => {
    stderr += d.toString();
    log.emit("data");
  });
  const exited = once(child, "exit").then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  const url = await new Promise<string>((resolve, reject) => {
    // The server's JSON log says where it listens, whatever its level.
    const listening = (): void => {
      const m = /"msg":"manent-server listening on (https?:\/\/[^\s"]+)"/.exec(stderr);
      if (m) {
        log.off("data", listening);
        resolve(m[1]!);
      }
    };
    log.on("data", listening);
    void exited.then(({ code, signal }) =>
      reject(new Error(`manent-server exited (${code ?? signal}) before listening:\n${logMessages(stderr)}\n${stderr.slice(-4000)}`)),
    );
  });
  return {
    url,
    api: new ApiClient(url, opts.token, opts.fetch),
    child,
    logs: () => stderr,
    logged: (line, from = 0) =>
      new Promise<string>((resolve, reject) => {
        const check = (): boolean => {
          // Whole lines only: the last piece may be half written.
          const found = stderr
            .slice(from)
            .split("\n")
            .slice(0, -1)
            .find((l) => line.test(l));
          if (found === undefined) return false;
          log.off("data", check);
          resolve(found);
          return true;
        };
        if (check()) return;
        log.on("data", check);
        void exited.then(({ code, signal }) => {
          log.off("data", check);
          reject(new Error(`manent-server exited (${code ?? signal}) before logging ${line}:\n${stderr.slice(-4000)}`));
        });
      }),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** What `jq -r .msg` shows of a JSON log: each line's message, as an operator reads why a start failed. */
export function logMessages(log: string): string {
  return log
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => {
      try {
        return String((JSON.parse(l) as { msg?: unknown }).msg ?? "");
      } catch {
        return l;
      }
    })
    .join("\n");
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `manent` CLI as a script would: stdout is a pipe, so the CLI answers JSON unless the
 * arguments ask for text (`-o text`). Nothing is set behind the test's back; test/support/terminal.ts
 * runs it in a pseudo-terminal where what a person sees matters.
 */
export async function runCli(
  args: string[],
  opts: { cwd: string; server?: string; token?: string; env?: Record<string, string> },
): Promise<CliResult> {
  const child = spawn(process.execPath, [cliBin, ...args], {
    cwd: opts.cwd,
    env: {
      ...process.env,
      ...(opts.server && { MANENT_SERVER: opts.server }),
      ...(opts.token && { MANENT_TOKEN: opts.token }),
      ...opts.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code: code ?? -1, stdout, stderr };
}

/**
 * Starts `manent` and resolves, with its exit, once its stderr matches `ready` (e.g. `manent login`
 * printing where to sign in); rejects if it exits before.
 */
export async function startCliUntil(
  args: string[],
  ready: RegExp,
  opts: { cwd: string; env?: Record<string, string> },
): Promise<{ match: RegExpExecArray; exited: Promise<CliResult> }> {
  const child = spawn(process.execPath, [cliBin, ...args], {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const exited = once(child, "exit").then(([code]) => ({ code: (code as number | null) ?? -1, stdout, stderr }));
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      const m = ready.exec(stderr);
      if (m) resolve(m);
    });
    void exited.then((r) => reject(new Error(`manent exited ${r.code} before ${String(ready)}: ${r.stderr}`)));
  });
  return { match, exited };
}
