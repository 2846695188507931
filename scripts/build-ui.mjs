// Bundles the web UI (ui/src, Preact) with esbuild into dist/ui: app.js, app.css, index.html.
// Run by `npm run build:ui`, by `npm ci` (prepare) and by scripts/test-setup.sh; manent-server
// serves dist/ui at /. Prints the bundle's size.
import { build } from "esbuild";
import { copyFile, mkdir, stat } from "node:fs/promises";
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
const js = (await stat(`${out}/assets/app.js`)).size;
const css = (await stat(`${out}/assets/app.css`)).size;
console.log(`web UI built into dist/ui: app.js ${js} bytes, app.css ${css} bytes`);
