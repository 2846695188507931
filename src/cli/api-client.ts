import type { ReleaseRecord, ReleaseSummary } from "../core/release/release-store.js";
import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import type { ReadableStream } from "node:stream/web";
import { createParser } from "eventsource-parser";
import type { PluginListing } from "../core/contract/hosted-plugin.js";
import type { DeployEvent } from "../core/engine/deploy-events.js";
import type { DeployRecord } from "../core/engine/deploy-store.js";
import type { Overview } from "../core/environments/overview.js";
import type { DriftReport, TargetDriftRecord } from "../core/drift/drift-record.js";
import { Code, ManentError, type ErrorJSON } from "../core/errors.js";
import type { Action, Grant, Principal } from "../core/identity/index.js";
import { connectionError, isTlsRefusal } from "./connection-errors.js";
export type { AuditEntry } from "../storage/pg-audit-log.js";
import type { AuditEntry } from "../storage/pg-audit-log.js";

/** A small client of manent-server's HTTP API (also used by the web UI); errors come back as ManentErrors with their codes. */
export class ApiClient {
  /** `fetch`: the transport; the CLI gives one that trusts `--ca-file` (see tls-transport.ts). */
  constructor(
    private readonly baseUrl: string,
    private readonly token: string | undefined,
    private readonly fetch: typeof globalThis.fetch = globalThis.fetch,
  ) {}

  submit(body: Record<string, unknown>): Promise<{ id: string; queued_behind?: string; waiting?: { hint: string } }> {
    return this.request("POST", "/api/v1/deploys", body);
  }

  rollback(body: Record<string, unknown>): Promise<{ id: string; queued_behind?: string }> {
    return this.request("POST", "/api/v1/rollbacks", body);
  }

  /** A new deploy retrying a failed, rolled back or cancelled one (same artifact, same settings). */
  retry(id: string): Promise<{ id: string; queued_behind?: string }> {
    return this.request("POST", `/api/v1/deploys/${encodeURIComponent(id)}/retry`, {});
  }

  /** A deploy; with `waitSeconds`, the server answers once it has ended (or when the wait is over). */
  deploy(id: string, waitSeconds = 0): Promise<DeployRecord> {
    return this.request("GET", `/api/v1/deploys/${encodeURIComponent(id)}${waitSeconds ? `?wait=${waitSeconds}` : ""}`);
  }

  /** Starts a deploy waiting for its deploy window now (admins); the reason goes to the audit log. */
  overrideWindow(id: string, reason: string): Promise<DeployRecord> {
    return this.request("POST", `/api/v1/deploys/${encodeURIComponent(id)}/window-override`, { reason });
  }

  /** The deploy after the cancel, with what the cancel does (`cancel.message`). */
  cancel(id: string): Promise<DeployRecord & { cancel?: { outcome: "cancelled" | "requested"; message: string } }> {
    return this.request("POST", `/api/v1/deploys/${encodeURIComponent(id)}/cancel`, {});
  }

  /** A rollout command: approve, promote (full: skip every remaining step) or abort. */
  rolloutCommand(id: string, command: "approve" | "promote" | "abort", full = false): Promise<DeployRecord> {
    return this.request("POST", `/api/v1/deploys/${encodeURIComponent(id)}/${command}`, command === "promote" ? { full } : {});
  }

  /** Checks now whether a descriptor's environment still runs its last release (also recorded). */
  checkDrift(body: Record<string, unknown>): Promise<Omit<DriftReport, "heal_deploy_id">> {
    return this.request("POST", "/api/v1/drift/checks", body);
  }

  /** The last drift check of each target the query names. */
  drift(query: Record<string, string | undefined>): Promise<{ targets: TargetDriftRecord[] }> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/drift?${q.toString()}`);
  }

  list(query: Record<string, string | undefined>): Promise<{ deploys: DeployRecord[] }> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/deploys?${q.toString()}`);
  }

  /** What runs where: applications by environment (GET /api/v1/overview). */
  overview(query: { tenant?: string | undefined; application?: string | undefined }): Promise<Overview> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/overview?${q.toString()}`);
  }

  /** Starts a release through the application's pipeline. */
  startRelease(body: Record<string, unknown>): Promise<{ id: string; status: "running" }> {
    return this.request("POST", "/api/v1/releases", body);
  }

  release(id: string): Promise<ReleaseRecord> {
    return this.request("GET", `/api/v1/releases/${encodeURIComponent(id)}`);
  }

  releases(query: Record<string, string | undefined>): Promise<{ releases: ReleaseSummary[] }> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/releases?${q.toString()}`);
  }

  /** Retries a failed or cancelled release: a new release from the stage where it stopped. */
  retryRelease(id: string): Promise<{ id: string; status: "running"; retry_of: string; from_stage: number }> {
    return this.request("POST", `/api/v1/releases/${encodeURIComponent(id)}/retry`, {});
  }

  /** A command on a release: cancel, approve, or promote `to` an environment of the manual stage it waits at. */
  releaseCommand(id: string, command: "cancel" | "approve" | "promote", to?: string): Promise<ReleaseRecord & { message?: string }> {
    return this.request("POST", `/api/v1/releases/${encodeURIComponent(id)}/${command}`, command === "promote" ? { to } : {});
  }

  plugins(): Promise<{ plugins: PluginView[] }> {
    return this.request("GET", "/api/v1/plugins");
  }

  /** Restarts an external plugin on the server (a token for all tenants only); answers once it has started. */
  restartPlugin(name: string): Promise<PluginView> {
    return this.request("POST", `/api/v1/plugins/${encodeURIComponent(name)}/restart`);
  }

  /** Fetches every git envconfig provider now (admin); per provider the commit before and after, and why it failed. */
  refreshEnvconfig(): Promise<{
    providers: { provider: string; before: string | null; after: string | null; error: string | null }[];
    auto_deploys: {
      tenant: string;
      application: string;
      artifact: string;
      environment: string;
      commit: string | null;
      sha256: string | null;
      deploy_id: string | null;
      error: string | null;
    }[];
  }> {
    return this.request("POST", "/api/v1/envconfig/refresh");
  }

  /** Whether this tenant's upload of these bytes is on the server already (its size), or undefined. */
  async uploaded(tenant: string, sha256: string): Promise<number | undefined> {
    try {
      return (await this.request<{ size: number }>("GET", uploadPath(tenant, sha256))).size;
    } catch (err) {
      if (err instanceof ManentError && err.code === Code.NotFound) return undefined;
      throw err;
    }
  }

  /** Streams a file to the server as an upload named by its sha256. */
  upload(tenant: string, sha256: string, file: string, size: number): Promise<{ sha256: string; size: number; created: boolean }> {
    const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
    return this.request("PUT", uploadPath(tenant, sha256), { raw: body, type: "application/octet-stream", length: size });
  }

  /** The server's version (answered without a token). */
  serverVersion(): Promise<{ version: string; api: string }> {
    return this.request("GET", "/api/v1/version");
  }

  /** A tenant's uploads (default: the caller's one tenant), with what needs each, the total and the quota. */
  uploads(tenant?: string): Promise<UploadListing> {
    return this.request("GET", `/api/v1/uploads${tenantQuery(tenant)}`);
  }

  /** Deletes an upload no deploy needs. */
  deleteUpload(sha256: string, tenant?: string): Promise<{ sha256: string; size: number; tenant: string }> {
    return this.request("DELETE", `/api/v1/uploads/${encodeURIComponent(sha256)}${tenantQuery(tenant)}`);
  }

  /** Removes a tenant's uploads no deploy needs (with dryRun: only says which). */
  sweepUploads(
    tenant: string | undefined,
    dryRun: boolean,
  ): Promise<{ tenant: string; dry_run: boolean; removed: { sha256: string; size: number }[]; removed_bytes: number }> {
    const q = new URLSearchParams({ ...(tenant !== undefined && { tenant }), dry_run: String(dryRun) });
    return this.request("POST", `/api/v1/uploads/sweep?${q.toString()}`);
  }

  /** Deletes now the history the server's retention policy lets go. */
  sweepHistory(): Promise<{ deploys: number; releases: number; audit_entries: number; audit_files: string[] }> {
    return this.request("POST", "/api/v1/retention/sweep");
  }

  /** Who the caller is (kind, id, name, e-mail, groups) and its grants. */
  whoami(): Promise<Principal> {
    return this.request("GET", "/api/v1/whoami");
  }

  /** Whether the caller may take an action there, and why; a scope field left out means any value. */
  canI(query: { action: Action; tenant?: string; application?: string; environment?: string }): Promise<CanIAnswer> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/auth/can-i?${q.toString()}`);
  }

  /** Any route of the API, for callers (the web UI) that need one this client has no method for. */
  call<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.request(method, path, body);
  }

  audit(query: Record<string, string | undefined>): Promise<{ entries: AuditEntry[] }> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/audit?${q.toString()}`);
  }

  /** Creates a managed API token; the answer holds its value, shown this once. */
  createToken(body: Record<string, unknown>): Promise<ApiTokenView & { token: string }> {
    return this.request("POST", "/api/v1/tokens", body);
  }

  tokens(query: Record<string, string | undefined>): Promise<{ tokens: ApiTokenView[] }> {
    const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
    return this.request("GET", `/api/v1/tokens?${q.toString()}`);
  }

  revokeToken(id: string): Promise<ApiTokenView> {
    return this.request("DELETE", `/api/v1/tokens/${encodeURIComponent(id)}`);
  }

  /**
   * Follows a server-sent event stream (`/api/v1/deploys/{id}/events` or `/api/v1/events`) until
   * `onEvent` returns true or the signal aborts. A dropped connection (a server restarting) is
   * resumed with `Last-Event-ID`, so no event is missed or repeated.
   */
  async streamEvents(
    path: string,
    onEvent: (event: DeployEvent) => boolean | void,
    opts: {
      after?: number;
      signal?: AbortSignal;
      reconnects?: number;
      /** Called each time the stream is connected. */ onOpen?: () => void;
    } = {},
  ): Promise<void> {
    let last = opts.after;
    let failures = 0;
    const maxFailures = opts.reconnects ?? 10;
    for (;;) {
      let stop = false;
      let received = false;
      let handlerError: unknown;
      try {
        const response = await this.fetch(new URL(path, this.baseUrl), {
          headers: {
            accept: "text/event-stream",
            ...(this.token && { authorization: `Bearer ${this.token}` }),
            ...(last !== undefined && { "last-event-id": String(last) }),
          },
          ...(opts.signal && { signal: opts.signal }),
        });
        if (!response.ok || !response.body) await this.failed(response, path);
        opts.onOpen?.();
        const parser = createParser({
          onEvent: (message) => {
            if (stop) return;
            const event = JSON.parse(message.data) as DeployEvent;
            last = event.id;
            received = true;
            try {
              if (onEvent(event) === true) stop = true;
            } catch (err) {
              // The caller's failure, not the connection's: it ends the stream instead of a reconnect.
              handlerError = err;
              stop = true;
            }
          },
        });
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
        try {
          while (!stop) {
            const { done, value } = await reader.read();
            if (done) break;
            parser.feed(value);
          }
        } finally {
          await reader.cancel().catch(() => undefined);
        }
        if (handlerError !== undefined) throw handlerError;
        if (stop) return;
      } catch (err) {
        if (err === handlerError) throw err;
        if (opts.signal?.aborted) return;
        if (err instanceof ManentError) throw err;
        // A certificate that does not verify will not verify on the next try either.
        if (isTlsRefusal(err)) throw connectionError(err, this.baseUrl);
      }
      if (received) failures = 0;
      if (++failures > maxFailures)
        throw new ManentError(Code.Unavailable, `lost the event stream of ${this.baseUrl}${path} ${failures} times`);
      await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** failures, 5000)));
    }
  }

  private async failed(response: Response, path: string): Promise<never> {
    const text = await response.text();
    let error: ErrorJSON | undefined;
    try {
      error = (JSON.parse(text) as { error?: ErrorJSON }).error;
    } catch {
      // not JSON: reported by status below
    }
    throw error ? answered(error) : new ManentError(Code.Unknown, `HTTP ${response.status} from ${path}`);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response: Response;
    const raw = body instanceof Object && "raw" in body ? (body as RawBody) : undefined;
    try {
      response = await this.fetch(new URL(path, this.baseUrl), {
        method,
        headers: {
          ...(body !== undefined && { "content-type": raw ? raw.type : "application/json" }),
          ...(raw && { "content-length": String(raw.length) }),
          ...(this.token && { authorization: `Bearer ${this.token}` }),
        },
        ...(raw ? { body: raw.raw, duplex: "half" } : body !== undefined && { body: JSON.stringify(body) }),
      } as RequestInit);
    } catch (err) {
      throw connectionError(err, this.baseUrl);
    }
    const text = await response.text();
    let json: unknown = {};
    try {
      if (text) json = JSON.parse(text) as unknown;
    } catch {
      throw new ManentError(Code.Unknown, `HTTP ${response.status} from ${path}: not a manent-server answer`);
    }
    if (!response.ok) {
      const error = (json as { error?: ErrorJSON }).error;
      throw error ? answered(error) : new ManentError(Code.Unknown, `HTTP ${response.status} from ${path}`);
    }
    return json as T;
  }
}

interface RawBody {
  raw: ReadableStream<Uint8Array>;
  type: string;
  length: number;
}

function tenantQuery(tenant: string | undefined): string {
  return tenant === undefined ? "" : `?tenant=${encodeURIComponent(tenant)}`;
}

/** GET /api/v1/uploads. */
export interface UploadListing {
  tenant: string;
  used_bytes: number;
  quota_bytes: number | null;
  uploads: {
    sha256: string;
    size: number;
    created_at: string;
    last_used_at: string | null;
    needed_by: {
      deploy: string;
      application: string;
      artifact: string;
      environment: string;
      version: string;
      status: string;
      reason: string;
    }[];
  }[];
}

function uploadPath(tenant: string, sha256: string): string {
  return `/api/v1/uploads/${sha256}?tenant=${encodeURIComponent(tenant)}`;
}

/** GET /api/v1/auth/can-i: the answer and its reason (the grant that allows it, or the permission missing). */
export interface CanIAnswer {
  allowed: boolean;
  reason: string;
  grant?: Grant;
}

/** A plugin as GET /api/v1/plugins lists it. */
export type PluginView = PluginListing;

/** A managed API token as GET /api/v1/tokens lists it (never its value). */
export interface ApiTokenView {
  id: string;
  name: string;
  role: string;
  tenant: string;
  application: string;
  environment: string;
  created_at: string;
  created_by: string;
  created_by_id: string;
  expires_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  revoked_by: string | null;
  status: "active" | "expired" | "revoked";
}

/**
 * The server's error answer as an error of the CLI. A fault of the server itself names the
 * request's id, which its operators find on the server's log lines of that request.
 */
function answered(error: ErrorJSON & { request_id?: unknown }): ManentError {
  const e = ManentError.fromJSON(error);
  if ((e.code !== Code.Internal && e.code !== Code.Unknown) || typeof error.request_id !== "string") return e;
  return ManentError.fromJSON({ ...error, message: `${error.message} (request ${error.request_id} in the server's log)` });
}
