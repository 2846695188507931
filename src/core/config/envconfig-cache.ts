import { createHash } from "node:crypto";
import type { Envconfig } from "./envconfig.js";

/** Whole envconfigs kept, and their source text's total size: a few of the largest files manent reads (1 MB each). */
const maxEntries = 64;
const maxTextBytes = 4 << 20;

interface Entry {
  sha256: string;
  bytes: number;
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

  /** The envconfig parsed from exactly `text` read at `file`, or `parse(text)` (kept when it succeeds). */
  get(file: string, text: string, parse: (text: string) => Envconfig): Envconfig {
    const sha256 = createHash("sha256").update(text).digest("hex");
    const hit = this.entries.get(file);
    if (hit?.sha256 === sha256) {
      this.entries.delete(file);
      this.entries.set(file, hit);
      return hit.envconfig;
    }
    const envconfig = deepFreeze(parse(text));
    this.drop(file);
    const bytes = Buffer.byteLength(text);
    if (bytes <= maxTextBytes) {
      this.entries.set(file, { sha256, bytes, envconfig });
      this.bytes += bytes;
      for (const oldest of this.entries.keys()) {
        if (this.entries.size <= maxEntries && this.bytes <= maxTextBytes) break;
        this.drop(oldest);
      }
    }
    return envconfig;
  }

  private drop(file: string): void {
    const e = this.entries.get(file);
    if (!e) return;
    this.entries.delete(file);
    this.bytes -= e.bytes;
  }
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const item of Object.values(v)) deepFreeze(item);
  }
  return v;
}
