// Compiles the TypeScript the test files load (src, test, bench, examples and scripts) into
// node_modules/.cache/test-js/ (not dist/, which the package ships), same layout, so that the test
// runner's processes load plain JavaScript with Node's own module loader. Under `--import tsx` every
// module a file imports goes through tsx's hooks on a loader thread: about 0.6 s of CPU more per
// test file before its first test, for each of the suite's ~180 files (bench/test-file-start.ts).
//
// Each compiled file's `import.meta.url` (`dirname`, `filename`) is its source's, so what a test
// reads, writes or spawns beside itself is in the real tree. Its imports resolve beside the compiled
// file, so the JavaScript and JSON files of those folders are linked there, and package.json (the
// package's "type", and a test imports it). Stack traces map back to the sources (inline source
// maps, `--enable-source-maps`). Only a source newer than its compiled file is compiled again (about
// 3 s for all of them, 0.3 s when nothing changed), and a compiled file whose source is gone is
// removed. esbuild compiles each file alone, as tsx does.
// Usage: node scripts/compile-tests.mjs (prints the output folder)
import { execFileSync } from "node:child_process";
import { transform } from "esbuild";
import { lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const outDir = join(root, "node_modules", ".cache", "test-js");
const folders = ["src", "test", "bench", "examples", "scripts"];
const tsconfig = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8"));

/** The files of `folders` git knows or would add (not ignored), or every file when git cannot say. */
function sourceFiles() {
  try {
    const out = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", ...folders], {
      cwd: root,
      stdio: ["ignore", "pipe", "ignore"],
      maxBuffer: 64 << 20,
    });
    return out
      .toString()
      .split("\0")
      .filter((f) => f !== "");
  } catch {
    return folders.flatMap((folder) =>
      readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile() && !join(e.parentPath, e.name).includes("/node_modules/"))
        .map((e) => relative(root, join(e.parentPath, e.name))),
    );
  }
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Links `target` (absolute) at `at`, unless a link to it is there already. */
function link(target, at) {
  try {
    if (lstatSync(at).isSymbolicLink()) return;
    rmSync(at, { recursive: true, force: true });
  } catch {
    // Not there yet.
  }
  mkdirSync(dirname(at), { recursive: true });
  symlinkSync(target, at);
}

async function compile(source, output) {
  const code = readFileSync(source, "utf8");
  const url = pathToFileURL(source).href;
  const result = await transform(code, {
    loader: "ts",
    format: "esm",
    target: `node${process.versions.node}`,
    sourcemap: "inline",
    sourcefile: source,
    tsconfigRaw: { compilerOptions: tsconfig.compilerOptions },
    define: {
      "import.meta.url": JSON.stringify(url),
      "import.meta.dirname": JSON.stringify(dirname(source)),
      "import.meta.filename": JSON.stringify(source),
    },
  });
  mkdirSync(dirname(output), { recursive: true });
  writeFileSync(output, result.code);
}

const wanted = new Set();
const jobs = [];
for (const file of sourceFiles()) {
  const source = join(root, file);
  if (file.endsWith(".ts") && !file.endsWith(".d.ts")) {
    const output = join(outDir, file.slice(0, -3) + ".js");
    wanted.add(output);
    const sourceTime = mtime(source);
    if (sourceTime === undefined) continue; // deleted, not yet committed
    const outputTime = mtime(output);
    if (outputTime === undefined || outputTime < sourceTime) jobs.push(compile(source, output));
  } else if (/\.(m?js|cjs|json)$/.test(file) && mtime(source) !== undefined) {
    const at = join(outDir, file);
    wanted.add(at);
    link(source, at);
  }
}
const pkg = join(outDir, "package.json");
wanted.add(pkg);
link(join(root, "package.json"), pkg);
await Promise.all(jobs);
// A compiled file or link whose source is gone would still be imported by a stale path.
for (const e of readdirSync(outDir, { recursive: true, withFileTypes: true })) {
  const path = join(e.parentPath, e.name);
  if (!e.isDirectory() && !wanted.has(path)) rmSync(path, { force: true });
}
process.stdout.write(`${outDir}\n`);
