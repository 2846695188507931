// hello, one release in one slot: answers every request with its version, slot and host, on
// MANENT_PORT (loopback). On SIGTERM it stops accepting, finishes what it has and exits.
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";

const version = readFileSync("VERSION", "utf8").trim();
const { MANENT_SLOT: slot, MANENT_PORT: port, MANENT_HOST: host, READY_FILE: readyFile } = process.env;

const server = createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  res.end(`${JSON.stringify({ app: "hello", version, slot, host })}\n`);
});
server.listen(Number(port), "127.0.0.1", () => {
  // The activate script waits for this file: the slot answers from now on.
  if (readyFile) writeFileSync(readyFile, String(process.pid));
});
process.on("SIGTERM", () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
