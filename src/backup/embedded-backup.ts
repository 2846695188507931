import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, readdir, readFile, realpath, rename, rm, stat } from "node:fs/promises";
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
  const { binDir, dataDir, runAs } = await placePostgres(await nativeBinDir(), join(root, "data"), logger);
  try {
    await run("tar", ["--extract", "--gzip", "--file", input, "-C", dataDir, "--strip-components=1", "--no-same-owner", "data"]);
    await run("tar", ["--extract", "--gzip", "--file", input, "-C", root, "--no-same-owner", "password"]);
    await chmod(join(root, "password"), 0o600);
    await checkRestoredData(input, binDir, dataDir, join(root, "password"));
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

/** pg_control_version by major version (PostgreSQL's pg_control.h), for the majors the embedded package has shipped. */
const controlVersions: Record<string, number> = { "16": 1300, "17": 1700 };

/**
 * What was extracted is a data directory this build's Postgres can start, not only members with the
 * right names: its PG_VERSION says this major version, its control file is a real one of that
 * version (8 KiB, pg_control_version at byte 8), the catalog (global/, base/ with a database) and
 * the configuration are there, and the password is not empty. Otherwise the extracted files are
 * removed by the caller and the archive refused naming what it lacks.
 */
async function checkRestoredData(input: string, binDir: string, dataDir: string, passwordFile: string): Promise<void> {
  const refuse = (why: string) => new ManentError(Code.InvalidArgument, `${input}: not a manent-server backup: ${why}`);
  // "postgres (PostgreSQL) 17.6": the major this build's Postgres is.
  const embeddedMajor = /\(PostgreSQL\) (\d+)/.exec((await run(join(binDir, "postgres"), ["--version"])).stdout)?.[1] ?? "?";
  const version = (await readFile(join(dataDir, "PG_VERSION"), "utf8")).trim();
  if (version !== embeddedMajor)
    throw refuse(`data/PG_VERSION says ${JSON.stringify(version.slice(0, 20))}, and this manent-server runs Postgres ${embeddedMajor}`);
  const control = await readFile(join(dataDir, "global", "pg_control")).catch(() => undefined);
  if (!control) throw refuse("it has no data/global/pg_control (the cluster's control file)");
  const expected = controlVersions[embeddedMajor];
  if (control.length !== 8192 || (expected !== undefined && control.readUInt32LE(8) !== expected))
    throw refuse(`data/global/pg_control is not a Postgres ${embeddedMajor} control file`);
  const databases = await readdir(join(dataDir, "base")).catch(() => [] as string[]);
  if (databases.length === 0) throw refuse("it has no database (data/base is missing or empty)");
  for (const file of ["postgresql.conf", "pg_hba.conf"]) if (!existsSync(join(dataDir, file))) throw refuse(`it has no data/${file}`);
  if ((await readFile(passwordFile, "utf8")).trim() === "") throw refuse("its password file is empty");
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
