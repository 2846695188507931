import type { ClientRequest } from "node:http";
import https from "node:https";
import { parseAllDocuments } from "yaml";

/** A Kubernetes object as JSON. */
export interface KubeObj {
  apiVersion: string;
  kind: string;
  metadata: { name?: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** A failed request, with the server's status code and `Status` body. */
export class KubeRequestError extends Error {
  constructor(
    readonly status: number,
    readonly body: { message?: string; reason?: string; details?: unknown },
    what: string,
  ) {
    super(`${what}: ${status} ${body.reason ?? ""}: ${body.message ?? ""}`);
  }
}

export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK";
  object: KubeObj;
}

/**
 * The harness's own client (the admin's or any token's): plain JSON over HTTPS, no typed models, so
 * that what a test applies (a CRD with `x-kubernetes-preserve-unknown-fields`, a Gateway API
 * object) reaches the server byte for byte. Resource paths come from discovery, refreshed when
 * a kind is unknown (a CRD applied a moment ago).
 */
export class KubeClient {
  private readonly agent: https.Agent;
  private readonly discovery = new Map<string, Promise<{ name: string; kind: string; namespaced: boolean }[]>>();

  constructor(
    readonly server: URL,
    caPem: string,
    private readonly token: string,
  ) {
    this.agent = new https.Agent({ ca: caPem, keepAlive: true, maxSockets: 8 });
  }

  close(): void {
    this.agent.destroy();
  }

  async request(
    method: string,
    path: string,
    opts: { query?: Record<string, string | undefined>; body?: unknown; contentType?: string } = {},
  ): Promise<unknown> {
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const headers: Record<string, string | number> = { Accept: "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (payload !== undefined) {
      headers["Content-Type"] = opts.contentType ?? "application/json";
      // Without it Node sends a chunked body, which the API server refuses on a DELETE.
      headers["Content-Length"] = payload.length;
    }
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = https.request(url, { method, headers, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(payload);
    });
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = { message: text.slice(0, 500) };
    }
    if (status < 200 || status > 299)
      throw new KubeRequestError(status, body as KubeRequestError["body"], `${method} ${url.pathname}${url.search}`);
    return body;
  }

  /** The URL path of an object, or of its collection when `name` is omitted. */
  async pathOf(apiVersion: string, kind: string, namespace?: string, name?: string): Promise<string> {
    let res = (await this.resources(apiVersion)).find((r) => r.kind === kind);
    if (!res) {
      this.discovery.delete(apiVersion);
      res = (await this.resources(apiVersion)).find((r) => r.kind === kind);
    }
    if (!res) throw new Error(`the API server does not serve ${kind} in ${apiVersion}`);
    const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    const ns = res.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
    return `${base}${ns}/${res.name}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
  }

  private resources(apiVersion: string): Promise<{ name: string; kind: string; namespaced: boolean }[]> {
    let cached = this.discovery.get(apiVersion);
    if (!cached) {
      const path = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      cached = this.request("GET", path).then(
        (list) =>
          ((list as { resources?: { name: string; kind: string; namespaced: boolean }[] }).resources ?? []).filter(
            (r) => !r.name.includes("/"),
          ),
        (err: unknown) => {
          if (err instanceof KubeRequestError && err.status === 404) return [];
          throw err;
        },
      );
      cached.catch(() => this.discovery.delete(apiVersion));
      this.discovery.set(apiVersion, cached);
    }
    return cached;
  }

  /** Server-side apply of `obj` as field manager `manager` (forced unless said otherwise). */
  async apply(obj: KubeObj, opts: { manager?: string; force?: boolean; subresource?: string } = {}): Promise<KubeObj> {
    const path = await this.pathOf(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name);
    return (await this.request("PATCH", opts.subresource ? `${path}/${opts.subresource}` : path, {
      query: { fieldManager: opts.manager ?? "manent-test-harness", force: opts.force === false ? undefined : "true" },
      body: obj,
      contentType: "application/apply-patch+yaml",
    })) as KubeObj;
  }

  /** Applies every document of a YAML text, in order (the tutorial's `kubectl apply -f rbac.yaml`). */
  async applyYaml(text: string, opts: { manager?: string } = {}): Promise<KubeObj[]> {
    const out: KubeObj[] = [];
    for (const doc of parseAllDocuments(text)) {
      const obj = doc.toJS() as KubeObj | null;
      if (obj) out.push(await this.apply(obj, opts));
    }
    return out;
  }

  /** A JSON merge patch (or another patch type) as an `Update` manager, the way kubectl edits. */
  async patch(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    body: unknown,
    opts: { manager?: string; subresource?: string; contentType?: string } = {},
  ): Promise<KubeObj> {
    const path = await this.pathOf(apiVersion, kind, namespace, name);
    return (await this.request("PATCH", opts.subresource ? `${path}/${opts.subresource}` : path, {
      query: { fieldManager: opts.manager },
      body,
      contentType: opts.contentType ?? "application/merge-patch+json",
    })) as KubeObj;
  }

  async get(apiVersion: string, kind: string, namespace: string | undefined, name: string): Promise<KubeObj | undefined> {
    try {
      return (await this.request("GET", await this.pathOf(apiVersion, kind, namespace, name))) as KubeObj;
    } catch (err) {
      if (err instanceof KubeRequestError && err.status === 404) return undefined;
      throw err;
    }
  }

  async list(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): Promise<KubeObj[]> {
    const list = (await this.request("GET", await this.pathOf(apiVersion, kind, namespace), { query: { labelSelector } })) as {
      items: KubeObj[];
    };
    return list.items;
  }

  /** Deletes an object; false when it was already gone. */
  async delete(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    opts: { gracePeriodSeconds?: number; uid?: string } = {},
  ): Promise<boolean> {
    const body: Record<string, unknown> = { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Background" };
    if (opts.gracePeriodSeconds !== undefined) body.gracePeriodSeconds = opts.gracePeriodSeconds;
    if (opts.uid) body.preconditions = { uid: opts.uid };
    try {
      await this.request("DELETE", await this.pathOf(apiVersion, kind, namespace, name), { body });
      return true;
    } catch (err) {
      if (err instanceof KubeRequestError && (err.status === 404 || err.status === 409)) return false;
      throw err;
    }
  }

  /**
   * Polls `fn` until it returns something other than undefined. For conditions the harness cannot
   * watch for (an object another controller fills in); bounded by `timeoutMs`.
   */
  async waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let delay = 20;
    for (;;) {
      const v = await fn();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 500);
    }
  }

  /**
   * Lists then watches a collection path (`/api/v1/pods`), calling `onEvent` for every object
   * (the list's as ADDED). Re-watches from the last resourceVersion when the server ends a watch,
   * and re-lists when that version is too old (410). Returns a stop function.
   */
  watch(collectionPath: string, onEvent: (e: WatchEvent) => void, onError: (err: unknown) => void): () => void {
    let stopped = false;
    let current: ClientRequest | undefined;
    const run = async (): Promise<void> => {
      let rv: string | undefined;
      while (!stopped) {
        try {
          if (rv === undefined) {
            const list = (await this.request("GET", collectionPath)) as { items: KubeObj[]; metadata: { resourceVersion: string } };
            for (const o of list.items) onEvent({ type: "ADDED", object: o });
            rv = list.metadata.resourceVersion;
          }
          rv = await this.watchOnce(collectionPath, rv, onEvent, (req) => (current = req));
        } catch (err) {
          if (stopped) return;
          if (err instanceof KubeRequestError && err.status === 410) {
            rv = undefined;
            continue;
          }
          onError(err);
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    };
    void run();
    return () => {
      stopped = true;
      current?.destroy();
    };
  }

  /** One watch request; resolves with the last resourceVersion seen when the server closes it. */
  private watchOnce(path: string, rv: string, onEvent: (e: WatchEvent) => void, started: (req: ClientRequest) => void): Promise<string> {
    const url = new URL(path, this.server);
    url.searchParams.set("watch", "true");
    url.searchParams.set("resourceVersion", rv);
    url.searchParams.set("allowWatchBookmarks", "true");
    return new Promise((resolve, reject) => {
      let last = rv;
      const req = https.request(
        url,
        { method: "GET", headers: { Authorization: `Bearer ${this.token}`, Accept: "application/json" }, agent: this.agent },
        (res) => {
          if (res.statusCode !== 200) {
            let text = "";
            res.on("data", (c: Buffer) => (text += c.toString()));
            res.on("end", () =>
              reject(new KubeRequestError(res.statusCode ?? 0, JSON.parse(text || "{}") as KubeRequestError["body"], `watch ${path}`)),
            );
            return;
          }
          let buf = "";
          res.on("data", (c: Buffer) => {
            buf += c.toString("utf8");
            let nl: number;
            while ((nl = buf.indexOf("\n")) >= 0) {
              const line = buf.slice(0, nl);
              buf = buf.slice(nl + 1);
              if (!line.trim()) continue;
              const e = JSON.parse(line) as WatchEvent | { type: "ERROR"; object: { code?: number; message?: string } };
              if (e.type === "ERROR") {
                req.destroy();
                reject(new KubeRequestError(e.object.code ?? 500, e.object, `watch ${path}`));
                return;
              }
              last = String((e.object.metadata as { resourceVersion?: string }).resourceVersion ?? last);
              if (e.type !== "BOOKMARK") onEvent(e);
            }
          });
          res.on("end", () => resolve(last));
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      started(req);
      req.end();
    });
  }
}

/** A namespaced CRD of `example.com`, version v1, whose resources take any fields (a test's custom kind). */
export function schemalessCrd(kind: string, plural: string): KubeObj {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.example.com` },
    spec: {
      group: "example.com",
      scope: "Namespaced",
      names: { plural, singular: kind.toLowerCase(), kind },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
        },
      ],
    },
  };
}
