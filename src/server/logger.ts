import { pino, type Logger as Pino } from "pino";
import type { Logger } from "../core/contract/index.js";

/** manent's structured JSON log (pino) behind the contract's Logger. */
export function createLogger(options: { level?: string; destination?: NodeJS.WritableStream } = {}): Logger & { pino: Pino } {
  const log = pino(
    { level: options.level ?? process.env.MANENT_LOG_LEVEL ?? "info", base: { service: "manent-server" } },
    options.destination ?? pino.destination(2),
  );
  const at =
    (level: "debug" | "info" | "warn" | "error") =>
    (msg: string, attrs?: Record<string, unknown>): void => {
      if (attrs) log[level](attrs, msg);
      else log[level](msg);
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), pino: log };
}
