import type { DeployRecord } from "../core/engine/deploy-store.js";
import { Code, ManentError, type ErrorJSON } from "../core/errors.js";

/** A small client of manent-server's HTTP API; errors come back as ManentErrors with their codes. */
export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string | undefined,
  ) {}

  submit(body: Record<string, unknown>): Promise<{ id: string; queued_behind?: string }> {
    return this.request("POST", "/api/v1/deploys", body);
  }

  rollback(body: Record<string, unknown>): Promise<{ id: string; queued_behind?: string }> {
    return this.request("POST", "/api/v1/rollbacks", body);
  }

  /** A deploy; with `waitSeconds`, the server answers once it has ended (or when the wait is over). */
  deploy(id: string, waitSeconds = 0): Promise<DeployRecord> {
    return this.request("GET", `/api/v1/deploys/${encodeURIComponent(id)}${waitSeconds ? `?wait=${waitSeconds}` : ""}`);
  }

  /** The deploy after the cancel, with what the cancel does (`cancel.message`). */
  cancel(id: string): Promise<DeployRecord & { cancel?: { outcome: "cancelled" | "requested"; message: string } }> {
    return this.request("POST", `/api/v1/deploys/${encodeURIComponent(id)}/cancel`, {});
  }

  list(query: Record<string, string | undefined>): Promise<{ deploys: DeployRecord[] }> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/deploys?${q.toString()}`);
  }

  plugins(): Promise<{ plugins: { name: string; kind: string; capabilities: string[] | null; capabilities_as_of?: string | null }[] }> {
    return this.request("GET", "/api/v1/plugins");
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(new URL(path, this.baseUrl), {
        method,
        headers: {
          ...(body !== undefined && { "content-type": "application/json" }),
          ...(this.token && { authorization: `Bearer ${this.token}` }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      throw new ManentError(Code.Unavailable, `cannot reach manent-server at ${this.baseUrl} (${cause}); is it running? (set --server or MANENT_SERVER)`);
    }
    const text = await response.text();
    const json = text ? (JSON.parse(text) as unknown) : {};
    if (!response.ok) {
      const error = (json as { error?: ErrorJSON }).error;
      throw error ? ManentError.fromJSON(error) : new ManentError(Code.Unknown, `HTTP ${response.status} from ${path}`);
    }
    return json as T;
  }
}
