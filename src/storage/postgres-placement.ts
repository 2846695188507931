import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { cp, lstat, mkdir, rename, rm, stat, symlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { Logger } from "../core/contract/index.js";
import type { RunAs } from "./postgres-process.js";

const run = promisify(execFile);

/** Where the server runs its binaries and keeps its data, and as whom. */
export interface Placement {
  binDir: string;
  dataDir: string;
  runAs: RunAs | undefined;
}

/** Shared by every workdir whose own path the postgres user cannot reach (a clone under /root). */
const systemHome = "/var/lib/manent/embedded-postgres";

/**
 * Postgres refuses to run as root, so as root it runs as the `postgres` system user (created when
 * missing), which must reach the binaries and the data through every parent directory. A workdir
 * or a node_modules under a private directory (mode 0700, as /root is) is not reachable: then the
 * binaries are copied once to /var/lib/manent and the data lives there too, with
 * `<workdir>/postgres/data` a symlink to it, so `workdir` still shows where it is.
 */
export async function placePostgres(nativeBinDir: string, wantedDataDir: string, logger: Logger): Promise<Placement> {
  if (process.getuid?.() !== 0) return { binDir: nativeBinDir, dataDir: wantedDataDir, runAs: undefined };
  const runAs = await postgresUser();
  let binDir = nativeBinDir;
  if (!(await reachable(nativeBinDir))) {
    const native = dirname(nativeBinDir);
    const copy = join(systemHome, `bin-${hash(native)}`);
    if (!existsSync(join(copy, "bin", "postgres"))) {
      logger.info("copying the Postgres binaries where the postgres user can run them", { from: native, to: copy });
      await mkdir(systemHome, { recursive: true, mode: 0o755 });
      const tmp = `${copy}.tmp-${process.pid}`;
      await cp(native, tmp, { recursive: true, verbatimSymlinks: true });
      await rename(tmp, copy);
    }
    binDir = join(copy, "bin");
  }
  let dataDir = wantedDataDir;
  if (!(await reachable(dirname(wantedDataDir)))) {
    dataDir = join(systemHome, `data-${hash(wantedDataDir)}`);
    await mkdir(systemHome, { recursive: true, mode: 0o755 });
    if (!(await lstat(wantedDataDir).catch(() => undefined))) {
      // No link: the workdir is new (or was deleted), so data left here belongs to nobody.
      await rm(dataDir, { recursive: true, force: true });
      await symlink(dataDir, wantedDataDir);
    }
    logger.info("the postgres user cannot reach the workdir: the data lives outside it", { data: dataDir, link: wantedDataDir });
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await run("chown", [`${runAs.uid}:${runAs.gid}`, dataDir]);
  return { binDir, dataDir, runAs };
}

async function postgresUser(): Promise<RunAs> {
  const ids = async (): Promise<RunAs> => {
    const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  try {
    return await ids();
  } catch {
    await run("useradd", ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"]);
    return ids();
  }
}

/** True when every directory from `dir` up to / lets others through (the x bit). */
async function reachable(dir: string): Promise<boolean> {
  for (let d = dir; ; d = dirname(d)) {
    const mode = (await stat(d)).mode;
    if ((mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

function hash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}
