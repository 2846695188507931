import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ManentError } from "../core/errors.js";
import { httpStatus } from "./http-status.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The HTTP handler while the server starts: the port is bound before the database and the engine
 * (so a taken port stops the start at once), and requests arriving meanwhile get 503 `unavailable`.
 */
export class StartupHandler {
  private api: Handler | undefined;

  readonly handle: Handler = (req, res) => {
    if (this.api) return this.api(req, res);
    const body = JSON.stringify({ error: new ManentError(Code.Unavailable, "manent-server is starting").toJSON() });
    res.writeHead(httpStatus(Code.Unavailable), {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "retry-after": "1",
    });
    res.end(body);
  };

  ready(api: Handler): void {
    this.api = api;
  }
}
