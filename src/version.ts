import { createRequire } from "node:module";

/** manent's version, from package.json; also the DBOS application version of its workflows. */
export const version: string = (createRequire(import.meta.url)("../package.json") as { version: string }).version;
