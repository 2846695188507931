import { execFile } from "node:child_process";
import { access, rename } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../..");
/** Where test builds go (gitignored). */
export const toolsBin = path.join(repoRoot, ".tools/bin");

export interface GoBinaries {
  /** sdk/go/cmd/manent-gohost: the Go host on hashicorp/go-plugin's client. */
  gohost: string;
  /** examples/go-plugin: the sample Go plugin. */
  goSample: string;
  /** test/external/fixtures/goplugin-only: a plugin on hashicorp/go-plugin alone, no manent SDK. */
  goPluginOnly: string;
}

const targets: { key: keyof GoBinaries; module: string; pkg: string; out: string }[] = [
  { key: "gohost", module: "sdk/go", pkg: "./cmd/manent-gohost", out: "manent-gohost" },
  { key: "goSample", module: "examples/go-plugin", pkg: ".", out: "manent-plugin-go-sample" },
  { key: "goPluginOnly", module: "test/external/fixtures/goplugin-only", pkg: ".", out: "manent-test-goplugin-only" },
];

let built: Promise<GoBinaries> | undefined;

/** `go` from PATH, else the official tarball's place (a CI shell may not have it on PATH). */
async function goCommand(): Promise<string> {
  if (process.env.GO) return process.env.GO;
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir && (await exists(path.join(dir, "go")))) return "go";
  }
  return (await exists("/usr/local/go/bin/go")) ? "/usr/local/go/bin/go" : "go";
}

/**
 * Builds the Go binaries once per test process with `go build` (Go's build cache makes the
 * second process's build a relink). Each binary is built to a private name and renamed into
 * place, so test files running at the same time never execute a half-written file.
 */
export function buildGoBinaries(): Promise<GoBinaries> {
  built ??= (async () => {
    const out = {} as GoBinaries;
    const go = await goCommand();
    for (const t of targets) {
      const dest = path.join(toolsBin, t.out);
      const tmp = `${dest}.tmp-${process.pid}`;
      try {
        await run(go, ["build", "-o", tmp, t.pkg], { cwd: path.join(repoRoot, t.module), maxBuffer: 16 << 20 });
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`go build ${t.pkg} in ${t.module} failed (run scripts/ci/go.sh): ${e.stderr || e.message}`);
      }
      await rename(tmp, dest);
      out[t.key] = dest;
    }
    return out;
  })();
  return built;
}

/** True when `p` exists. */
export async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}
