import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { JobClaims, RunningOidcProvider } from "./oidc-provider.js";

/**
 * GitHub Actions' ID token request endpoint, as a runner gives a job with `id-token: write` in
 * ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN: a GET of the URL with
 * `&audience=…` and the request token as bearer answers `{"value": "<ID token>"}`, a token the
 * provider mints for that audience with the job's claims. A wrong request token gets 401, an
 * audience the provider does not issue to 400: the job's own mistakes, as GitHub answers them.
 */
export interface ActionsTokenEndpoint {
  /** ACTIONS_ID_TOKEN_REQUEST_URL: with a query already, as GitHub's (the job appends `&audience=`). */
  requestUrl: string;
  /** ACTIONS_ID_TOKEN_REQUEST_TOKEN. */
  requestToken: string;
  close(): Promise<void>;
}

export async function startActionsTokenEndpoint(provider: RunningOidcProvider, claims: JobClaims): Promise<ActionsTokenEndpoint> {
  const requestToken = randomBytes(24).toString("hex");
  const expected = Buffer.from(`Bearer ${requestToken}`);
  const server: Server = createServer((req, res) => {
    const answer = (status: number, body: Record<string, unknown>) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    const given = Buffer.from(req.headers.authorization ?? "");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return answer(401, { message: "bad request token" });
    const audience = new URL(req.url ?? "/", "http://x").searchParams.get("audience");
    if (!audience) return answer(400, { message: "no audience" });
    provider.mintJobToken(audience, claims).then(
      (value) => answer(200, { count: value.length, value }),
      (e: unknown) => answer(400, { message: String(e) }),
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    requestUrl: `http://127.0.0.1:${port}/_apis/distributedtask/idtoken?api-version=2.0`,
    requestToken,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
