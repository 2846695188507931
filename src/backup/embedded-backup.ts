import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, realpath, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Logger } from "../core/contract/index.js";
import type { LoadedConfig } from "../core/config/index.js";
import { Code, ManentError } from "../core/errors.js";
import { nativeBinDir } from "../storage/embedded-postgres.js";
import { placePostgres } from "../storage/postgres-placement.js";

const run = promisify(execFile);

/**
 * Backup and restore of the embedded Postgres: a copy of its data directory and password, taken
 * while it is stopped (so the copy is consistent and needs no client tools: the embedded-postgres
 * package ships no pg_dump, and Debian 12's pg_dump 15 refuses its Postgres 17). The archive is
 * restored by the same manent version's binaries, into a workdir that has no Postgres yet.
 * A Postgres of one's own (dbos.database_url) is backed up with its own tools (pg_dump).
 */
export async function backupEmbedded(config: LoadedConfig, output: string, logger: Logger): Promise<{ bytes: number }> {
  refuseExternal(config, "back up");
  const root = join(config.workdirPath, "postgres");
  const link = join(root, "data");
  if (!existsSync(join(link, "PG_VERSION"))) {
    throw new ManentError(
      Code.NotFound,
      `${config.file}: workdir ${config.workdirPath} holds no embedded Postgres (no ${link}/PG_VERSION)`,
      {
        details: { file: config.file, field: "workdir" },
      },
    );
  }
  const dataDir = await realpath(link);
  await refuseRunning(dataDir, config.workdirPath);
  const tmp = `${output}.tmp-${process.pid}`;
  try {
    // Members: `password` and `data/…` (the data directory, wherever the link leads).
    await run("tar", ["--create", "--gzip", "--file", tmp, "-C", root, "password", "-C", dataDir, "--transform", "s,^\\.,data,", "."]);
    await chmod(tmp, 0o600); // the database and its password
    await rename(tmp, output);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  const { size } = await stat(output);
  logger.info("embedded Postgres backed up", { file: output, bytes: size });
  return { bytes: size };
}

export async function restoreEmbedded(config: LoadedConfig, input: string, logger: Logger): Promise<void> {
  refuseExternal(config, "restore");
  const root = join(config.workdirPath, "postgres");
  if (existsSync(join(root, "data", "PG_VERSION")) || existsSync(join(root, "password"))) {
    throw new ManentError(
      Code.FailedPrecondition,
      `${config.file}: workdir ${config.workdirPath} has an embedded Postgres already: restore into a new workdir (or move ${root} away first)`,
      { details: { file: config.file, field: "workdir" } },
    );
  }
  if (!existsSync(input)) throw new ManentError(Code.NotFound, `${input}: no such file`);
  const members = await run("tar", ["--list", "--gzip", "--file", input]).then(
    (r) => new Set(r.stdout.split("\n").map((m) => m.replace(/\/$/, ""))),
    (err: { stderr?: string }) => {
      throw new ManentError(Code.InvalidArgument, `${input}: not a manent-server backup (${(err.stderr ?? "").trim() || "unreadable"})`);
    },
  );
  if (!members.has("password") || !members.has("data/PG_VERSION")) {
    throw new ManentError(Code.InvalidArgument, `${input}: not a manent-server backup (no password and data/PG_VERSION in it)`);
  }
  await mkdir(root, { recursive: true, mode: 0o711 });
  await chmod(root, 0o711);
  // Where this workdir's data goes, and as whom Postgres will run (the postgres user as root).
  const { dataDir, runAs } = await placePostgres(await nativeBinDir(), join(root, "data"), logger);
  try {
    await run("tar", ["--extract", "--gzip", "--file", input, "-C", dataDir, "--strip-components=1", "--no-same-owner", "data"]);
    await run("tar", ["--extract", "--gzip", "--file", input, "-C", root, "--no-same-owner", "password"]);
    await chmod(join(root, "password"), 0o600);
    await chmod(dataDir, 0o700);
    if (runAs) await run("chown", ["-R", `${runAs.uid}:${runAs.gid}`, dataDir]);
  } catch (err) {
    // Half a restore is no restore: the next start would make an empty database next to it.
    await rm(join(root, "password"), { force: true });
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  logger.info("embedded Postgres restored", { file: input, dir: dataDir });
}

function refuseExternal(config: LoadedConfig, what: string): void {
  if (config.dbos.database_url) {
    throw new ManentError(
      Code.FailedPrecondition,
      `${config.file}: dbos.database_url is set: ${what} that Postgres with its own tools (pg_dump/pg_restore, see docs/operations/database.md); manent-server ${what === "restore" ? "restore" : "backup"} handles the embedded one`,
      { details: { file: config.file, field: "dbos.database_url" } },
    );
  }
}

/** A copy of a running Postgres's files is not consistent: the server must be stopped. */
async function refuseRunning(dataDir: string, workdir: string): Promise<void> {
  const pidFile = join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, "utf8")).split("\n")[0]);
  let alive = false;
  try {
    process.kill(pid, 0);
    alive = true;
  } catch (err) {
    alive = (err as NodeJS.ErrnoException).code === "EPERM";
  }
  if (Number.isInteger(pid) && pid > 0 && alive) {
    throw new ManentError(
      Code.FailedPrecondition,
      `the embedded Postgres of workdir ${workdir} is running (pid ${pid}): stop manent-server first, then back up`,
    );
  }
}
