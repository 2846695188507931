/**
 * `npm run docs`: writes the reference pages under docs/reference from the code.
 * `npm run docs -- --check` changes nothing and exits 1 when a checked-in page is out of date
 * (test/docs/references.test.ts checks the same in `npm test`).
 */
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { generateReferences, repoRoot } from "./docs/references.js";

const check = process.argv.includes("--check");
const { files, undocumented } = await generateReferences();
let stale = 0;
for (const [path, content] of files) {
  const full = join(repoRoot, path);
  const current = await readFile(full, "utf8").catch(() => undefined);
  if (current === content) continue;
  stale++;
  if (check) {
    process.stderr.write(`${path} is out of date: run npm run docs\n`);
  } else {
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, content);
    process.stdout.write(`wrote ${path}\n`);
  }
}
// A page the generator no longer makes (e.g. the placeholder's JSON) must not linger.
for (const name of await readdir(join(repoRoot, "docs/reference")).catch(() => [] as string[])) {
  const path = `docs/reference/${name}`;
  if (files.has(path)) continue;
  stale++;
  if (check) process.stderr.write(`${path} is not generated any more: run npm run docs\n`);
  else await rm(join(repoRoot, path));
}
for (const u of undocumented) process.stderr.write(`no description: ${u}\n`);
if (check && (stale > 0 || undocumented.length > 0)) process.exitCode = 1;
if (!check && stale === 0) process.stdout.write("docs/reference is up to date\n");
// The CLI modules and prom-client leave nothing running, but do not wait on them.
process.exit(process.exitCode ?? 0);
