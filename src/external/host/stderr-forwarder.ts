import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import type { Logger } from "../../core/contract/types.js";
import { parseHclogLine } from "../protocol/hclog.js";

const prefixed: [string, keyof Logger][] = [
  ["[TRACE]", "debug"],
  ["[DEBUG]", "debug"],
  ["[INFO]", "info"],
  ["[WARN]", "warn"],
  ["[ERROR]", "error"],
];

/**
 * Forwards a plugin's stderr to manent's logger: hclog JSON lines keep their level and message,
 * their attributes nested under `plugin_fields` (so a plugin's `level`, `time`, `msg`, `deploy`…
 * cannot stand in for manent's own fields) and hclog's `@module` and `@timestamp`, plus `plugin`;
 * other lines go as they are, with go-plugin's level guess (`[WARN]` prefixes; a Go panic and
 * everything after it is an error). Keeps the last lines so a failed start can say why.
 */
export function forwardStderr(
  stream: Readable,
  plugin: string,
  logger: Logger,
  keep = 20,
): { tail(): string[]; /** Resolves once every line has been read (the plugin closed stderr). */ ended: Promise<void> } {
  const last: string[] = [];
  let inPanic = false;
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  const ended = new Promise<void>((resolve) => lines.once("close", resolve));
  lines.on("line", (line) => {
    if (line === "") return;
    last.push(line.length > 500 ? line.slice(0, 500) + "…" : line);
    if (last.length > keep) last.shift();
    const entry = parseHclogLine(line);
    if (entry === undefined) {
      if (line.startsWith("panic: ") || line.startsWith("fatal error: ")) inPanic = true;
      const level = inPanic ? "error" : (prefixed.find(([p]) => line.startsWith(p))?.[1] ?? "info");
      logger[level](line, { plugin, stream: "stderr" });
      return;
    }
    const attrs = {
      plugin,
      ...(entry.module !== undefined && { "@module": entry.module }),
      ...(entry.timestamp !== undefined && { "@timestamp": entry.timestamp }),
      ...(Object.keys(entry.attrs).length > 0 && { plugin_fields: entry.attrs }),
    };
    logger[entry.level === "trace" ? "debug" : entry.level](entry.message, attrs);
  });
  return { tail: () => [...last], ended };
}
