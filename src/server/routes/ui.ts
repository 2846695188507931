import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { serveStatic } from "@hono/node-server/serve-static";
import type { ApiApp } from "../api-deps.js";

/** The web UI's bundle (scripts/build-ui.mjs), beside the sources or the compiled server alike. */
const uiDir = fileURLToPath(new URL("../../../dist/ui/", import.meta.url));

/** Pages, not API: left out of the OpenAPI document (test/server/openapi.test.ts knows them). */
export const uiRoutes = ["GET /", "GET /assets/*"];

// The UI loads nothing from elsewhere and runs no inline script; the API is same-origin.
const headers = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** Serves the web UI at `/` (its files under /assets/). */
export function uiRoutesOn(app: ApiApp): void {
  app.get("/", async (c) => {
    const index = `${uiDir}index.html`;
    if (!existsSync(index))
      return c.text("The web UI is not built: run `npm run build:ui` (npm ci and the test set-up do).\n", 503, headers);
    return c.html(await readFile(index, "utf8"), 200, headers);
  });
  app.get(
    "/assets/*",
    async (c, next) => {
      await next();
      for (const [k, v] of Object.entries(headers)) c.res.headers.set(k, v);
    },
    // app.js.br / app.js.gz made by the build, chosen by the browser's Accept-Encoding (Vary is set).
    serveStatic({ root: uiDir, precompressed: true }),
  );
}
