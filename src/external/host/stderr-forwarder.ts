import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import type { Logger } from "../../core/contract/types.js";
import { parseHclogLine } from "../protocol/hclog.js";

/**
 * Forwards a plugin's stderr to manent's logger: hclog JSON lines keep their level, message and
 * attributes (plus `plugin`); other lines (a panic, console output) go as they are. Keeps the
 * last lines so a failed start can say why.
 */
export function forwardStderr(stream: Readable, plugin: string, logger: Logger, keep = 20): { tail(): string[] } {
  const last: string[] = [];
  createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => {
    if (line === "") return;
    last.push(line.length > 500 ? line.slice(0, 500) + "…" : line);
    if (last.length > keep) last.shift();
    const entry = parseHclogLine(line);
    if (entry === undefined) {
      logger.info(line, { plugin, stream: "stderr" });
      return;
    }
    const attrs = { ...entry.attrs, plugin };
    (entry.level === "trace" ? logger.debug : logger[entry.level]).call(logger, entry.message, attrs);
  });
  return { tail: () => [...last] };
}
