// Bundles the web UI (ui/src, Preact) with esbuild into dist/ui: app.js, app.css, index.html.
// Run by `npm run build:ui`, by `npm ci` (prepare) and by scripts/test-setup.sh; manent-server
// serves dist/ui at /. Prints the bundle's size.
import { build } from "esbuild";
import { copyFile, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const out = `${root}dist/ui`;
await mkdir(`${out}/assets`, { recursive: true });
await build({
  entryPoints: { app: `${root}ui/src/main.tsx` },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  jsx: "automatic",
  jsxImportSource: "preact",
  outdir: `${out}/assets`,
  logLevel: "warning",
});
await copyFile(`${root}ui/src/styles.css`, `${out}/assets/app.css`);
await copyFile(`${root}ui/index.html`, `${out}/index.html`);
// Compressed once here, so the server sends the smallest copy a browser accepts without compressing per request.
const sizes = [];
for (const name of ["app.js", "app.css"]) {
  const file = `${out}/assets/${name}`;
  const body = await readFile(file);
  const br = brotliCompressSync(body, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
  });
  await writeFile(`${file}.br`, br);
  await writeFile(`${file}.gz`, gzipSync(body, { level: 9 }));
  sizes.push(`${name} ${(await stat(file)).size} bytes (${br.length} brotli)`);
}
console.log(`web UI built into dist/ui: ${sizes.join(", ")}`);
