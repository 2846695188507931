import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * The environment that makes a manent-server write a V8 CPU profile of its whole run into `dir`
 * at its exit (cpu-profile.mjs, preloaded: NODE_OPTIONS cannot carry --cpu-prof). Open the
 * `.cpuprofile` files in Chrome's DevTools.
 */
export async function cpuProfileEnv(dir: string): Promise<Record<string, string>> {
  await mkdir(resolve(dir), { recursive: true });
  return {
    MANENT_BENCH_CPU_PROF_DIR: resolve(dir),
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${pathToFileURL(join(import.meta.dirname, "cpu-profile.mjs")).href}`.trim(),
  };
}
