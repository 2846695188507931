// Compiles src/**/*.ts into dist/ (same layout, ESM, source maps) with esbuild: what bin/manent.js and
// bin/manent-server.js run. Well under a second, so `npm ci` (prepare), scripts/test-setup.sh,
// scripts/test.sh and the tests' server helper (when a source is newer than the last build) run it.
// Type checking stays with `npm run typecheck`; `npm run build` (tsc) also writes the .d.ts files
// of the package's exports. A file is written only when its content changed (through a rename), so a
// binary starting during a rebuild never reads half a file.
// Usage: node scripts/build-js.mjs [--if-stale]
import { execFileSync } from "node:child_process";
import { build } from "esbuild";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const src = join(root, "src");
const dist = join(root, "dist");
/** Touched at the end of every build: a source newer than it has not been compiled yet. */
const stamp = join(dist, ".js-build-stamp");
/** The build's application version, read by src/version.ts (see there). */
const buildInfo = join(dist, "build-info.json");

/**
 * package.json's version plus the commit built ("0.1.0+3f2a9c1d0b4e"): each build its own DBOS
 * application version. A checkout without git (or outside a repository) gets the package version alone.
 */
export function buildVersion() {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
  try {
    const commit = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: root, stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim();
    return /^[0-9a-f]{7,40}$/.test(commit) ? `${pkg}+${commit}` : pkg;
  } catch {
    return pkg;
  }
}

function builtVersion() {
  try {
    return JSON.parse(readFileSync(buildInfo, "utf8")).version;
  } catch {
    return undefined;
  }
}

function sources() {
  return readdirSync(src, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts"))
    .map((e) => join(e.parentPath, e.name));
}

/** True when dist/ was never built or a file under src/ changed (or was added) since the last build. */
export function distIsStale() {
  let built;
  try {
    built = statSync(stamp).mtimeMs;
  } catch {
    return true;
  }
  if (!["cli", "server"].every((bin) => existsSync(join(dist, bin, "main.js")))) return true;
  // A new commit is a new application version even when no source changed since the last build.
  if (builtVersion() !== buildVersion()) return true;
  // Directories too: a file renamed or deleted changes its directory's mtime.
  return readdirSync(src, { recursive: true, withFileTypes: true }).some((e) => statSync(join(e.parentPath, e.name)).mtimeMs > built);
}

/** Compiles src/ into dist/; returns how many files were (re)written. */
export async function buildDist() {
  const result = await build({
    entryPoints: sources(),
    outbase: src,
    outdir: dist,
    bundle: false,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "linked",
    sourcesContent: false,
    write: false,
    logLevel: "warning",
  });
  let written = 0;
  for (const file of result.outputFiles) {
    let same = false;
    try {
      same = readFileSync(file.path).equals(file.contents);
    } catch {
      // not built yet
    }
    if (same) continue;
    mkdirSync(dirname(file.path), { recursive: true });
    const tmp = `${file.path}.${process.pid}.tmp`;
    writeFileSync(tmp, file.contents);
    renameSync(tmp, file.path);
    written++;
  }
  const info = `${JSON.stringify({ version: buildVersion() })}\n`;
  writeFileSync(`${buildInfo}.${process.pid}.tmp`, info);
  renameSync(`${buildInfo}.${process.pid}.tmp`, buildInfo);
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  return written;
}

if (process.argv[1] && relative(process.argv[1], fileURLToPath(import.meta.url)) === "") {
  if (process.argv.includes("--if-stale") && !distIsStale()) process.exit(0);
  const written = await buildDist();
  console.log(`src compiled into dist/: ${written} file(s) written`);
}
