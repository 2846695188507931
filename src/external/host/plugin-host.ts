import { randomBytes } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Logger } from "../../core/contract/types.js";
import { Code, ManentError } from "../../core/errors.js";
import { generateIdentity, type Identity } from "../protocol/mtls.js";
import { privateDir } from "../../core/artifacts/workdir-modes.js";
import { copyVerified, sourceIdentity, type StagedBinary } from "./activation.js";
import { Reaper } from "./reaper.js";

/** The file in a run directory that names its socket directory (kept short, under $TMPDIR). */
const SOCKETS_FILE = "sockets";
/** The file in a run directory that names the process owning it: "<pid> <start time>". */
const OWNER_FILE = "owner";
const SOCKET_DIR_PREFIX = "manent-plugin-";
/** Run directories: `run-<pid>-<token>` under `<workdir>/plugins`, or a private host's under $TMPDIR. */
const WORKDIR_RUN = /^run-\d+-[0-9a-f]+$/;
const PRIVATE_RUN = /^manent-plugin-copies-\d+-[0-9a-f]+$/;

interface VerifiedCopy {
  /** dev, ino, size, mtime and ctime of the source the copy was made from. */
  source: string;
  /** The copy's sha256 when a configured hash was checked against it. */
  sha256: string | undefined;
  path: string;
}

export interface PluginHostOptions {
  /**
   * The server's workdir: private copies live in `<workdir>/plugins/run-<pid>-<token>/`, and runs
   * left by a server that died are removed when the next one starts. Without it (tests, benches):
   * a fresh directory under $TMPDIR.
   */
  workdir?: string;
  logger?: Logger;
}

/**
 * What the external plugins of one server share: the private copies of their binaries (each one
 * verified once and reused while its source is unchanged), the host's AutoMTLS identity
 * (generated once, not at each plugin start) and the directory of their sockets.
 *
 * Every plugin using it holds a reference ({@link acquire}); when the last one is released the
 * run's directories are removed.
 */
export class PluginHost {
  private readonly copies = new Map<string, Promise<VerifiedCopy>>();
  private identityPromise: Promise<Identity> | undefined;
  private refs = 0;
  private removed: Promise<void> | undefined;
  /** Kills this host's plugins if the process dies (undefined where it cannot run: setpriv per start). */
  readonly reaper: Reaper | undefined = Reaper.available() ? new Reaper() : undefined;

  private constructor(
    /** This run's directory for private copies (0700). */
    readonly runDir: string,
    /** This run's directory for per-process socket directories (0700, under $TMPDIR: socket paths are short). */
    readonly socketDir: string,
  ) {}

  /** Creates this run's directories, first removing what runs of dead servers left in `workdir`. */
  static async create(o: PluginHostOptions = {}): Promise<PluginHost> {
    const token = randomBytes(6).toString("hex");
    let runDir: string;
    if (o.workdir) {
      const root = path.join(o.workdir, "plugins");
      await privateDir(root);
      await removeStaleRuns(root, o.logger);
      runDir = path.join(root, `run-${process.pid}-${token}`);
    } else {
      // A host of its own (tests, benches): in $TMPDIR, where runs of killed processes are removed too.
      await removeStaleRuns(os.tmpdir(), o.logger, PRIVATE_RUN);
      runDir = path.join(os.tmpdir(), `${SOCKET_DIR_PREFIX}copies-${process.pid}-${token}`);
    }
    await privateDir(runDir);
    const socketDir = path.join(os.tmpdir(), `${SOCKET_DIR_PREFIX}${process.pid}-${token}`);
    await privateDir(socketDir);
    await writeFile(path.join(runDir, SOCKETS_FILE), socketDir, { mode: 0o600 });
    await writeFile(path.join(runDir, OWNER_FILE), `${process.pid} ${await startTime(process.pid)}`, { mode: 0o600 });
    liveRuns.add(runDir);
    return new PluginHost(runDir, socketDir);
  }

  acquire(): void {
    this.refs++;
  }

  /** Drops a reference; the last one removes this run's copies and socket directories. */
  async release(): Promise<void> {
    if (--this.refs > 0) return;
    liveRuns.delete(this.runDir);
    this.reaper?.close();
    this.removed ??= Promise.all([
      rm(this.runDir, { recursive: true, force: true }),
      rm(this.socketDir, { recursive: true, force: true }),
    ]).then(() => {});
    await this.removed;
  }

  /**
   * {@link release} without waiting for I/O (a plugin's own host, let go as its close() returns):
   * the run is removed before the process can exit.
   */
  releaseNow(): void {
    if (--this.refs > 0 || this.removed) return;
    liveRuns.delete(this.runDir);
    this.reaper?.close();
    rmSync(this.runDir, { recursive: true, force: true });
    rmSync(this.socketDir, { recursive: true, force: true });
    this.removed = Promise.resolve();
  }

  /** The host's AutoMTLS identity, generated on first use and then shared by every start. */
  identity(): Promise<Identity> {
    this.identityPromise ??= generateIdentity();
    this.identityPromise.catch(() => (this.identityPromise = undefined));
    return this.identityPromise;
  }

  /**
   * Starts generating the identity in the background (a server does it while it starts). The
   * reaper starts with the first plugin: a server that runs no plugin starts no process.
   */
  warmUp(): void {
    this.identity().catch(() => {});
  }

  /**
   * The binary to exec for a start: the private copy made from `command` and checked against
   * `sha256`, made now or reused when the source (dev, ino, size, mtime, ctime) and the wanted hash
   * are unchanged. Nobody else can write a copy (0500 in a 0700 directory), so what runs is what
   * was checked. Also a fresh private directory for the process's sockets.
   */
  async stage(plugin: string, command: string, sha256: string | undefined): Promise<StagedBinary> {
    if (this.removed)
      throw new ManentError(Code.FailedPrecondition, `plugin ${plugin}: the plugin host is closed`, { details: { plugin } });
    const copy = await this.verifiedCopy(plugin, command, sha256);
    const dir = path.join(this.socketDir, randomBytes(6).toString("hex"));
    await privateDir(dir);
    return { dir, path: copy.path, remove: () => rm(dir, { recursive: true, force: true }) };
  }

  private async verifiedCopy(plugin: string, command: string, sha256: string | undefined): Promise<VerifiedCopy> {
    const source = await sourceIdentity(command);
    const cached = this.copies.get(command);
    if (cached) {
      const c = await cached.catch(() => undefined);
      if (c && c.source === source && (sha256 === undefined || c.sha256 === sha256)) return c;
      // A copy in progress for another version, or a failed one, is replaced.
      if (this.copies.get(command) === cached) this.copies.delete(command);
      if (c) void rm(c.path, { force: true }); // a process still running it keeps its inode
    }
    const dest = path.join(
      this.runDir,
      `${path
        .basename(command)
        .replace(/[^\w.-]/g, "_")
        .slice(0, 40)}-${randomBytes(6).toString("hex")}`,
    );
    const made = copyVerified(plugin, command, dest, sha256).then((r) => ({ source: r.source, sha256: r.sha256, path: dest }));
    this.copies.set(command, made);
    made.catch(() => {
      if (this.copies.get(command) === made) this.copies.delete(command);
    });
    return made;
  }
}

/** Run directories of this process (several hosts may share a workdir in one process, e.g. tests). */
const liveRuns = new Set<string>();

/**
 * Removes the run directories of servers that are gone (and their socket directories): a run
 * whose owner process is not alive any more (its pid is free or now belongs to a process started
 * at another time, e.g. pid 1 again in a restarted container). A live server's run is left alone.
 */
export async function removeStaleRuns(root: string, logger?: Logger, runName = WORKDIR_RUN): Promise<string[]> {
  const removed: string[] = [];
  const entries = await readdir(root).catch(() => [] as string[]);
  for (const name of entries) {
    if (!runName.test(name)) continue;
    const dir = path.join(root, name);
    if (liveRuns.has(dir)) continue;
    const owner = await readFile(path.join(dir, OWNER_FILE), "utf8").catch(() => undefined);
    // No owner file yet: a run being created right now (its owner is written just after).
    if (owner === undefined) continue;
    const [pid, started] = owner.split(" ");
    if (pid && started !== undefined && (await startTime(Number(pid))) === started) continue;
    const sockets = await readFile(path.join(dir, SOCKETS_FILE), "utf8").catch(() => "");
    // Only a socket directory this code makes: never a path a file could point anywhere else.
    if (path.dirname(sockets) === os.tmpdir() && path.basename(sockets).startsWith(SOCKET_DIR_PREFIX)) {
      await rm(sockets, { recursive: true, force: true });
    }
    await rm(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  if (removed.length)
    logger?.info("removed plugin copies left by a server that stopped without cleaning up", { removed: removed.join(",") });
  return removed;
}

/**
 * When process `pid` started (clock ticks since boot, from /proc), "" if it does not run. Where
 * /proc is missing, whether the pid is alive ("alive"), which a reused pid fools.
 */
async function startTime(pid: number): Promise<string> {
  if (!Number.isInteger(pid) || pid <= 0) return "";
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch((err: NodeJS.ErrnoException) =>
    err.code === "ENOENT" && existsSync("/proc/self/stat") ? "" : undefined,
  );
  if (stat === undefined) return isAlive(pid) ? "alive" : "";
  // Fields after the command name (in parentheses, which may itself hold spaces): starttime is the 22nd field.
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
