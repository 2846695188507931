import { pino, type Logger as Pino } from "pino";
import type { Logger } from "../core/contract/index.js";

/** The server's log: the contract's Logger, and a line written whatever the level. */
export type ServerLogger = Logger & {
  pino: Pino;
  /** At info level even when the log's level is higher: what scripts wait for (the address listened on). */
  always(msg: string, attrs?: Record<string, unknown>): void;
};

/**
 * manent's structured JSON log (pino) behind the contract's Logger: one JSON object per line, and
 * nothing else on the stream. `context` adds fields to every line (the request being handled).
 */
export function createLogger(
  options: { level?: string; destination?: NodeJS.WritableStream; context?: () => object | undefined } = {},
): ServerLogger {
  const context = options.context;
  const log = pino(
    {
      level: options.level ?? process.env.MANENT_LOG_LEVEL ?? "info",
      base: { service: "manent-server" },
      // A copy: pino merges each line's fields into what the mixin returns.
      ...(context && { mixin: () => ({ ...context() }) }),
    },
    options.destination ?? pino.destination(2),
  );
  const at =
    (level: "debug" | "info" | "warn" | "error") =>
    (msg: string, attrs?: Record<string, unknown>): void => {
      if (attrs) log[level](attrs, msg);
      else log[level](msg);
    };
  const unfiltered = log.child({}, { level: "info" });
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    pino: log,
    always: (msg, attrs) => unfiltered.info(attrs ?? {}, msg),
  };
}
