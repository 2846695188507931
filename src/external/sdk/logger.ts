import { formatHclogLine, type LogLevel } from "../protocol/hclog.js";
import type { Logger } from "../../core/contract/types.js";

/**
 * The plugin's logger: hclog JSON lines on stderr, which the host parses and forwards with level,
 * message and attributes. Writes go to fd 2 through the original stderr writer, so nothing a
 * plugin does to process.stdout can interleave with them.
 */
export function hclogLogger(write: (line: string) => void = (l) => process.stderr.write(l), fields: Record<string, unknown> = {}): Logger {
  const log = (level: LogLevel) => (msg: string, attrs?: Record<string, unknown>) =>
    write(formatHclogLine(level, msg, { ...fields, ...attrs }));
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}
