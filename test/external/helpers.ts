import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundlePlugin } from "../../examples/ts-plugin/bundle.js";
import type { Logger, Request, SecretsAccessor } from "../../src/plugin.js";
import { Code, ManentError } from "../../src/plugin.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../..");

/** A temporary directory removed by the returned cleanup. */
export async function tempDir(prefix = "manent-ext-test-"): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Bundles the sample TS plugin (self-contained, as the host runs a private copy) into `dir`. */
export function buildSamplePlugin(dir: string): Promise<string> {
  return bundlePlugin(path.join(repoRoot, "examples/ts-plugin/main.ts"), path.join(dir, "manent-ts-sample-plugin"));
}

/** Bundles a test fixture plugin from test/external/fixtures. */
export function buildFixture(name: string, dir: string): Promise<string> {
  return bundlePlugin(path.join(here, "fixtures", `${name}.ts`), path.join(dir, name));
}

export interface LogEntry {
  level: "debug" | "info" | "warn" | "error";
  msg: string;
  attrs: Record<string, unknown>;
}

/** What a plugin logged as attributes: the host keeps them apart from its own, under `plugin_fields`. */
export function pluginFields(e: LogEntry): Record<string, unknown> {
  return (e.attrs.plugin_fields ?? {}) as Record<string, unknown>;
}

/**
 * A logger that records entries and lets a test await one. An entry that never comes fails the
 * wait after 30 s with what was logged, instead of holding the file until the runner's timeout.
 */
export function recordingLogger(): Logger & { entries: LogEntry[]; waitFor(pred: (e: LogEntry) => boolean): Promise<LogEntry> } {
  const entries: LogEntry[] = [];
  const waiters: { pred: (e: LogEntry) => boolean; resolve(e: LogEntry): void }[] = [];
  const log =
    (level: LogEntry["level"]) =>
    (msg: string, attrs: Record<string, unknown> = {}) => {
      const e = { level, msg, attrs };
      entries.push(e);
      for (const w of [...waiters]) {
        if (w.pred(e)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(e);
        }
      }
      if (process.env.MANENT_TEST_LOG) process.stderr.write(`[${level}] ${msg} ${JSON.stringify(attrs)}\n`);
    };
  return {
    entries,
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    waitFor(pred) {
      const found = entries.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = {
          pred,
          resolve(e: LogEntry) {
            clearTimeout(timer);
            resolve(e);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`no such log entry within 30 s; logged: ${JSON.stringify(entries.slice(-20))}`));
        }, 30_000);
        waiters.push(waiter);
      });
    },
  };
}

export function mapSecrets(values: Record<string, string>): SecretsAccessor & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async secret(name: string) {
      asked.push(name);
      const v = values[name];
      if (v === undefined) throw new ManentError(Code.NotFound, `secret ${name} not found`);
      return v;
    },
  };
}

export function request(overrides: Partial<Request> = {}): Request {
  return {
    deploymentId: "d-1",
    tenant: "acme",
    application: "shop",
    environment: "prod",
    artifact: { type: "file", name: "shop", version: "1.0.0", source: "/dev/null" },
    targets: [{ host: "web1", labels: {} }],
    params: {},
    secrets: mapSecrets({ "deploy-key": "s3cret" }),
    parallelism: 1,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** True while a process with this pid exists (signal 0 probes without touching it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Waits until `pid` is gone or a zombie (dead, not yet reaped by its parent), polling /proc every 20 ms. */
export async function waitGone(pid: number, timeoutMs = 10_000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (!alive(pid) || isZombie(pid)) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}
