import { createHash } from "node:crypto";
import { statSync, type BigIntStats } from "node:fs";
import type { Envconfig } from "./envconfig.js";
import { fileNotFound, readYamlText } from "./yaml-file.js";

/**
 * Whole envconfigs kept, and their source text's total size: a few of the largest files manent
 * reads (1 MB each), or many small ones (a fleet's hundreds of applications, read in turn: fewer
 * entries than files would drop each one just before it is read again).
 */
const maxEntries = 1024;
const maxTextBytes = 4 << 20;

/**
 * A file whose status changed less than this before it was looked at is read again the next time,
 * whatever its status then says: a file's times come from a clock that ticks every few
 * milliseconds, so a second change within the tick of the first could leave the same status.
 */
const racyNs = 2_000_000_000n;

interface Entry {
  sha256: string;
  bytes: number;
  envconfig: Envconfig;
  /** For a file read with {@link EnvconfigCache.read}: its text, and the status it had before it was read. */
  file?: { text: string; status: string };
}

/** An envconfig as read from its file: its text, the text's sha256, and what it parses to. */
export interface ReadEnvconfig {
  text: string;
  sha256: string;
  envconfig: Envconfig;
}

/**
 * Envconfigs already parsed and validated, by file and by the sha256 of their text: a submission
 * reads its envconfig twice (the answer, then the deploy's resolve step) and a fleet's deploys read
 * the same files again and again, and parsing 20,000 targets of YAML costs a second and ~100 MB.
 * The file is still read every time: a changed byte is a new parse (and its errors), never a stale
 * envconfig. What it returns is frozen: shared between deploys, it must not be changed by one.
 * One per server (LoadedConfig), most recently used kept.
 */
export class EnvconfigCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    /** Wall-clock nanoseconds, which file times are compared with (a test's own clock). */
    private readonly now: () => bigint = () => BigInt(Date.now()) * 1_000_000n,
  ) {}

  /**
   * The envconfig file at `path` (`label` in errors): its text read again only when its status
   * (device, inode, size, modification and change times) differs from the one it had when last
   * read, or when that status was too recent to tell a later change apart (see {@link racyNs}).
   * A file replaced, rewritten or touched is read again; its errors are given every time.
   */
  async read(path: string, label: string, parse: (text: string) => Envconfig): Promise<ReadEnvconfig> {
    const lookedAt = this.now();
    // Synchronous: a status takes microseconds, the thread pool's round trip ten times its CPU (every submission looks at its envconfig).
    let info: BigIntStats | undefined;
    try {
      info = statSync(path, { bigint: true });
    } catch (err) {
      // A missing file is the common case of a provider tried before the one that has it.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw fileNotFound(label);
      info = undefined;
    }
    // No status (a refused file): the read gives the error, naming the file.
    if (!info) return this.readText(path, label, parse, undefined);
    const status = `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
    const hit = this.entries.get(path);
    if (hit?.file?.status === status) {
      this.touch(path, hit);
      return { text: hit.file.text, sha256: hit.sha256, envconfig: hit.envconfig };
    }
    return this.readText(path, label, parse, settled(info, lookedAt) ? status : undefined);
  }

  private async readText(path: string, label: string, parse: (text: string) => Envconfig, status: string | undefined) {
    const text = await readYamlText(path, label);
    const sha256 = createHash("sha256").update(text).digest("hex");
    const envconfig = this.parsed(path, text, sha256, parse, status === undefined ? undefined : { text, status });
    return { text, sha256, envconfig };
  }

  /** The envconfig parsed from exactly `text` read at `file`, or `parse(text)` (kept when it succeeds). */
  get(file: string, text: string, parse: (text: string) => Envconfig): Envconfig {
    return this.parsed(file, text, createHash("sha256").update(text).digest("hex"), parse, undefined);
  }

  private parsed(file: string, text: string, sha256: string, parse: (text: string) => Envconfig, read: Entry["file"]): Envconfig {
    const hit = this.entries.get(file);
    if (hit?.sha256 === sha256) {
      // The same text: its parse kept, its status (what says it is still this text) taken anew.
      if (read) hit.file = read;
      else delete hit.file;
      this.touch(file, hit);
      return hit.envconfig;
    }
    const envconfig = deepFreeze(parse(text));
    this.drop(file);
    const bytes = Buffer.byteLength(text);
    if (bytes <= maxTextBytes) {
      this.entries.set(file, { sha256, bytes, envconfig, ...(read && { file: read }) });
      this.bytes += bytes;
      for (const oldest of this.entries.keys()) {
        if (this.entries.size <= maxEntries && this.bytes <= maxTextBytes) break;
        this.drop(oldest);
      }
    }
    return envconfig;
  }

  /** Most recently used last. */
  private touch(file: string, entry: Entry): void {
    this.entries.delete(file);
    this.entries.set(file, entry);
  }

  private drop(file: string): void {
    const e = this.entries.get(file);
    if (!e) return;
    this.entries.delete(file);
    this.bytes -= e.bytes;
  }
}

/**
 * Whether a file's status, looked at `lookedAtNs`, will tell its next change: its last change
 * (and modification time) lies at least {@link racyNs} before.
 */
export function settled(info: { ctimeNs: bigint; mtimeNs: bigint }, lookedAtNs: bigint): boolean {
  return info.ctimeNs + racyNs <= lookedAtNs && info.mtimeNs + racyNs <= lookedAtNs;
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const item of Object.values(v)) deepFreeze(item);
  }
  return v;
}
