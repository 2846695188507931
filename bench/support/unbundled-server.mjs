// Runs a checkout's compiled server unbundled (its dist/server/main.js, named by UNBUNDLED_MAIN),
// with the same arguments as bin/manent-server.js. The bundle the binary runs carries its own copy
// of pg, out of reach of bench/support/statement-tally.cjs, which hooks the one in node_modules.
import { pathToFileURL } from "node:url";

const mainJs = process.env.UNBUNDLED_MAIN;
if (!mainJs) throw new Error("UNBUNDLED_MAIN: the compiled server's dist/server/main.js");
const { main } = await import(pathToFileURL(mainJs).href);
await main(process.argv);
