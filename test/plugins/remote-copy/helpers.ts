import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readlink, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import type { Logger, Request, RollbackRequest, Target, TargetRelease } from "../../../src/plugin.js";
import { ManentError, Code } from "../../../src/plugin.js";
import { sha256File } from "../../../src/plugins/remote-copy/artifact-file.js";

const run = promisify(execFile);

export interface LogEntry {
  level: string;
  msg: string;
  attrs?: Record<string, unknown>;
}

/** A logger that records entries and lets a test react to one (e.g. kill sshd at the first upload progress). */
export class RecordingLogger implements Logger {
  readonly entries: LogEntry[] = [];
  private readonly hooks: {
    msg: string;
    fn: (e: LogEntry) => void;
    once: boolean;
  }[] = [];
  /** Calls `fn` for the next entry with this message only. */
  onceOn(msg: string, fn: (e: LogEntry) => void): void {
    this.hooks.push({ msg, fn, once: true });
  }
  /** Calls `fn` for every entry with this message. */
  on(msg: string, fn: (e: LogEntry) => void): void {
    this.hooks.push({ msg, fn, once: false });
  }
  private add(level: string, msg: string, attrs?: Record<string, unknown>): void {
    const e = { level, msg, ...(attrs ? { attrs } : {}) };
    this.entries.push(e);
    for (const h of this.hooks.filter((x) => x.msg === msg)) {
      if (h.once) this.hooks.splice(this.hooks.indexOf(h), 1);
      h.fn(e);
    }
  }
  debug(msg: string, attrs?: Record<string, unknown>): void {
    this.add("debug", msg, attrs);
  }
  info(msg: string, attrs?: Record<string, unknown>): void {
    this.add("info", msg, attrs);
  }
  warn(msg: string, attrs?: Record<string, unknown>): void {
    this.add("warn", msg, attrs);
  }
  error(msg: string, attrs?: Record<string, unknown>): void {
    this.add("error", msg, attrs);
  }
}

export interface TestArtifact {
  path: string;
  version: string;
  sha256: string;
}

/** A .tar.gz holding app.txt ("<version>") and, when `randomBytesCount` is set, an incompressible blob. */
export async function makeTarball(dir: string, version: string, randomBytesCount = 0): Promise<TestArtifact> {
  const src = join(dir, `src-${version}`);
  await mkdir(join(src, "bin"), { recursive: true });
  await writeFile(join(src, "app.txt"), version);
  await writeFile(join(src, "bin", "run.sh"), "#!/bin/sh\necho run\n", {
    mode: 0o755,
  });
  if (randomBytesCount > 0) await writeFile(join(src, "blob.bin"), randomBytes(randomBytesCount));
  const path = join(dir, `app-${version}.tar.gz`);
  await run("tar", ["-czf", path, "-C", src, "."]);
  return { path, version, sha256: await sha256File(path) };
}

/** A plain (non-archive) artifact of `size` random bytes. */
export async function makeFile(dir: string, name: string, version: string, size: number): Promise<TestArtifact> {
  const path = join(dir, name);
  await writeFile(path, randomBytes(size));
  return { path, version, sha256: await sha256File(path) };
}

export interface RequestOptions {
  artifact: TestArtifact;
  targets: Target[];
  params: Record<string, string>;
  secrets?: Record<string, string>;
  parallelism?: number;
  signal?: AbortSignal;
  logger?: Logger;
}

export function request(o: RequestOptions): Request {
  const secrets = o.secrets ?? {};
  return {
    deploymentId: "d-1",
    tenant: "acme",
    application: "shop",
    environment: "test",
    artifact: {
      type: "tarball",
      name: "shop",
      version: o.artifact.version,
      source: o.artifact.path,
      sha256: o.artifact.sha256,
      path: o.artifact.path,
    },
    targets: o.targets,
    params: o.params,
    secrets: {
      secret: async (name) => {
        const v = secrets[name];
        if (v === undefined) throw new ManentError(Code.NotFound, `secret ${name} not found`);
        return v;
      },
    },
    parallelism: o.parallelism ?? 1,
    logger: o.logger ?? new RecordingLogger(),
    signal: o.signal ?? new AbortController().signal,
  };
}

export function rollbackRequest(o: RequestOptions, releases: TargetRelease[]): RollbackRequest {
  return { ...request(o), releases };
}

/** The version `<base>/current` points to, "" when there is no `current`. */
export async function currentOf(base: string): Promise<string> {
  try {
    return basename(await readlink(join(base, "current")));
  } catch {
    return "";
  }
}
