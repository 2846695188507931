import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ManentError } from "../core/errors.js";
import { httpStatus } from "./http-status.js";
import { requestIdHeader, requestIdOf, type RequestLog } from "./request-log.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The HTTP handler while the server starts: the port is bound before the database and the engine
 * (so a taken port stops the start at once). Meanwhile `/livez` says the process is alive (a
 * first start creating the embedded Postgres is not a reason to restart it) and every other
 * request, `/readyz` included, gets 503 `unavailable` with its request id.
 */
export class StartupHandler {
  private api: Handler | undefined;

  constructor(private readonly requests: RequestLog) {}

  readonly handle: Handler = (req, res) => {
    if (this.api) return this.api(req, res);
    const header = req.headers[requestIdHeader];
    const requestId = requestIdOf(Array.isArray(header) ? header[0] : header);
    const path = (req.url ?? "/").split("?")[0];
    this.requests.run({ request_id: requestId }, () => {
      const [status, body] =
        path === "/livez"
          ? [200, { status: "ok", starting: true }]
          : [
              httpStatus(Code.Unavailable),
              { error: { ...new ManentError(Code.Unavailable, "manent-server is starting").toJSON(), request_id: requestId } },
            ];
      const text = JSON.stringify(body);
      res.writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
        [requestIdHeader]: requestId,
        ...(status !== 200 && { "retry-after": "1" }),
      });
      res.end(text);
    });
  };

  ready(api: Handler): void {
    this.api = api;
  }
}
