import { createHash } from "node:crypto";
import { ApiClient } from "../../src/cli/api-client.js";
import { ServerFixture, type StartedServer } from "./server-fixture.js";
import type { ServerProcess } from "./server-process.js";

/** An entry of manent.yml's auth.tokens with its secret in the clear: the test calls with it, manent.yml holds its sha256. */
export interface TestToken {
  name: string;
  tenant: string;
  role?: string;
  environment?: string;
  token: string;
}

/** An API answer read whole: its status, its text and the error it names (when it is one). */
export interface Answer {
  status: number;
  text: string;
  error: { code: string; message: string } | undefined;
}

/**
 * A real manent-server on a fresh database with API tokens of given roles, and its workspace holding
 * one artifact (dist/app.txt): the set-up the RBAC, retry and overview tests share.
 */
export class TokenServer extends ServerFixture {
  /** For `before`: `tokens` become manent.yml's auth.tokens, each secret stored as its sha256. */
  async startWithTokens(artifactText: string, tokens: TestToken[]): Promise<StartedServer> {
    const auth = {
      tokens: tokens.map(({ token, ...entry }) => ({ ...entry, sha256: createHash("sha256").update(token).digest("hex") })),
    };
    return this.start(artifactText, { auth });
  }

  /** The API client of `token`. */
  readonly api = (token: string): ApiClient => new ApiClient(this.started().url, token);

  /** A raw API call as `token` (a JSON body when given), read whole: for the statuses and errors the client would throw on. */
  readonly request = async (token: string, method: string, path: string, body?: unknown): Promise<Answer> => {
    const res = await fetch(new URL(path, this.started().url), {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { "content-type": "application/json" }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, text, error: (JSON.parse(text) as { error?: Answer["error"] }).error };
  };

  private started(): ServerProcess {
    if (!this.server) throw new Error("TokenServer: start() has not run");
    return this.server;
  }
}
