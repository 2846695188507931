import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { chown, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { randomBytes } from "node:crypto";
import { Code, ManentError } from "../core/errors.js";
import type { Logger } from "../core/contract/index.js";

/** Who the Postgres processes run as: the `postgres` user when manent runs as root. */
export interface RunAs {
  uid: number;
  gid: number;
}

/** Linux's util-linux setpriv, which sets the parent-death signal of the program it runs. */
const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

const env = { LC_MESSAGES: "C", LANG: "C.UTF-8", PATH: process.env.PATH ?? "/usr/bin:/bin" };

/** Creates a cluster in `dataDir` with `user`/`password` and scram-sha-256 authentication. */
export async function initdb(
  binDir: string,
  dataDir: string,
  user: string,
  password: string,
  runAs: RunAs | undefined,
  logger: Logger,
): Promise<void> {
  // initdb reads the password from a file, readable only by the user it runs as and removed at once.
  const pwfile = join(tmpdir(), `manent-pw-${randomBytes(8).toString("hex")}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (runAs) await chown(pwfile, runAs.uid, runAs.gid);
    const child = spawn(
      join(binDir, "initdb"),
      [
        `--pgdata=${dataDir}`,
        "--auth=scram-sha-256",
        `--username=${user}`,
        `--pwfile=${pwfile}`,
        "--lc-messages=C",
        "--locale=C.UTF-8",
        "--encoding=UTF8",
      ],
      { env, stdio: ["ignore", "pipe", "pipe"], ...runAs },
    );
    let output = "";
    child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    logger.debug("initdb", { output: output.trim() });
    if (code !== 0)
      throw new ManentError(
        Code.FailedPrecondition,
        `initdb of ${dataDir} failed (exit ${code}): ${output.trim().split("\n").slice(-3).join(" ")}`,
      );
  } finally {
    await rm(pwfile, { force: true });
  }
}

/**
 * Runs `postgres` on `dataDir`, listening on 127.0.0.1:`port`; resolves once it accepts
 * connections. The server is killed with this process if this process exits.
 */
export async function startPostgres(
  binDir: string,
  dataDir: string,
  port: number,
  runAs: RunAs | undefined,
  logger: Logger,
): Promise<ChildProcess> {
  const postgres = join(binDir, "postgres");
  const args = [
    "-D",
    dataDir,
    "-p",
    String(port),
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "max_connections=200",
    "-c",
    "unix_socket_directories=",
  ];
  // The kernel sends the postmaster SIGINT (fast shutdown, crash-safe) when this process dies, even
  // by SIGKILL, which no exit handler sees: the embedded Postgres never outlives its server.
  const [file, argv] = setpriv ? [setpriv, ["--pdeathsig", "INT", "--", postgres, ...args]] : [postgres, args];
  const child = spawn(file, argv, { env, stdio: ["ignore", "pipe", "pipe"], ...runAs });
  const killOnExit = (): void => void child.kill("SIGINT");
  process.on("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  let log = "";
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer): void => {
      const text = d.toString();
      log += text;
      for (const line of text.split("\n").filter(Boolean)) logger.debug("postgres", { line });
      if (log.includes("database system is ready to accept connections")) resolve();
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(
        new ManentError(
          Code.Unavailable,
          `the embedded Postgres exited during its start (${code ?? signal}): ${log.trim().split("\n").slice(-3).join(" ")}`,
        ),
      ),
    );
  });
  return child;
}

/** Fast shutdown (crash-safe), waiting for the server to exit. */
export async function stopPostgres(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGINT");
  await exited;
}
