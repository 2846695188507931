import https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { Code, ManentError } from "../../core/errors.js";
import { targetId, type Target } from "../../core/contract/index.js";
import { KubeApiError, type KubeStatus } from "./kube-api-error.js";
import type { KubeObject } from "./objects.js";
import { tlsVerifyCodes } from "../../net/tls-verify-codes.js";

/** One resource of an API group version, as discovery lists it. */
export interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
  verbs?: string[];
}

export interface RequestOptions {
  query?: Record<string, string | undefined>;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
}

/**
 * A connection to one cluster's API server. client-node builds the TLS and bearer-token setup
 * from an in-memory kubeconfig (no file, no kubectl); requests go through node:https with that
 * agent rather than through client-node's typed serializer, because the serializer rewrites
 * objects of known kinds through its models and drops fields it does not model (for instance
 * `x-kubernetes-preserve-unknown-fields` in a CRD schema), which server-side apply must never do.
 */
export class ClusterClient {
  readonly server: string;
  /** The cluster in messages: the target's identity (its name, else its host). */
  readonly name: string;
  /** client-node's config, built on first use: importing client-node costs a server start most of a second. */
  private kubeConfig: Promise<KubeConfig> | undefined;
  private readonly caData: string | undefined;
  private readonly token: string;
  private httpsOptions: Promise<https.RequestOptions> | undefined;
  private agent: https.Agent | undefined;
  private readonly resourceCache = new Map<string, Promise<ApiResource[]>>();
  private readonly hasCa: boolean;

  constructor(
    readonly target: Target,
    token: string,
    ca: string | undefined,
  ) {
    this.server = `https://${formatHost(target.host)}:${target.port ?? 443}`;
    this.name = targetId(target);
    this.hasCa = ca !== undefined && ca !== "";
    this.caData = ca ? Buffer.from(ca).toString("base64") : undefined;
    this.token = token;
  }

  private kc(): Promise<KubeConfig> {
    this.kubeConfig ??= import("@kubernetes/client-node").then(({ KubeConfig }) => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "target", server: this.server, ...(this.caData && { caData: this.caData }), skipTLSVerify: false }],
        users: [{ name: "manent", token: this.token }],
        contexts: [{ name: "manent", cluster: "target", user: "manent" }],
        currentContext: "manent",
      });
      return kc;
    });
    return this.kubeConfig;
  }

  /** The API server's version (`v1.31.4+k3s1`), from /version through client-node's VersionApi. */
  async version(): Promise<string> {
    try {
      const { VersionApi } = await import("@kubernetes/client-node");
      const info = await (await this.kc()).makeApiClient(VersionApi).getCode();
      return info.gitVersion;
    } catch (err) {
      throw this.wrapTransport(err, "GET /version");
    }
  }

  /** Every group/version the server serves (`v1`, `apps/v1`…). */
  async groupVersions(): Promise<string[]> {
    const core = (await this.request("GET", "/api")) as { versions?: string[] };
    const groups = (await this.request("GET", "/apis")) as { groups?: { versions?: { groupVersion: string }[] }[] };
    const out = [...(core.versions ?? [])];
    for (const g of groups.groups ?? []) for (const v of g.versions ?? []) out.push(v.groupVersion);
    return out;
  }

  /**
   * What `helm template --api-versions` needs to see the cluster as `helm install` would: every
   * group/version and every `group/version/Kind`. A group whose resources cannot be listed (an
   * aggregated API that is down) still counts by its group/version.
   */
  async helmApiVersions(): Promise<string[]> {
    const gvs = await this.groupVersions();
    const kinds = await Promise.all(
      gvs.map((gv) =>
        this.resources(gv).then(
          (rs) => rs.map((r) => `${gv}/${r.kind}`),
          () => [] as string[],
        ),
      ),
    );
    return [...gvs, ...kinds.flat()];
  }

  /** The resources of one group/version; cached for the life of this client. */
  resources(apiVersion: string): Promise<ApiResource[]> {
    let cached = this.resourceCache.get(apiVersion);
    if (!cached) {
      const path = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      cached = this.request("GET", path).then((list) =>
        ((list as { resources?: ApiResource[] }).resources ?? []).filter((r) => !r.name.includes("/")),
      );
      // A failed lookup must not stick: a CRD applied a moment later makes the group appear.
      cached.catch(() => this.resourceCache.delete(apiVersion));
      this.resourceCache.set(apiVersion, cached);
    }
    return cached;
  }

  /** Forgets discovery of `apiVersion` (after installing the CRD that serves it). */
  forget(apiVersion: string): void {
    this.resourceCache.delete(apiVersion);
  }

  /** The resource serving `apiVersion`/`kind`, or undefined when the cluster does not know it. */
  async resourceFor(apiVersion: string, kind: string): Promise<ApiResource | undefined> {
    try {
      return (await this.resources(apiVersion)).find((r) => r.kind === kind);
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** The URL path of an object (or of its collection when `name` is omitted). */
  async pathOf(apiVersion: string, kind: string, namespace: string | undefined, name?: string): Promise<string> {
    const res = await this.resourceFor(apiVersion, kind);
    if (!res) {
      throw new ManentError(Code.FailedPrecondition, `cluster ${this.name}: the API server does not serve ${kind} in ${apiVersion}`);
    }
    const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    const ns = res.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
    return `${base}${ns}/${res.name}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
  }

  /** Server-side apply of `obj` with field manager `manager`. */
  async apply(obj: KubeObject, opts: { manager: string; force: boolean; dryRun: boolean; signal?: AbortSignal }): Promise<KubeObject> {
    const path = await this.pathOf(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name);
    return (await this.request("PATCH", path, {
      query: { fieldManager: opts.manager, force: opts.force ? "true" : undefined, dryRun: opts.dryRun ? "All" : undefined },
      body: obj,
      // JSON is YAML, and the apply content type is what makes the server treat it as an apply.
      contentType: (await import("@kubernetes/client-node")).PatchStrategy.ServerSideApply,
      signal: opts.signal,
    })) as KubeObject;
  }

  /** GET an object; undefined when it does not exist. */
  async get(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    signal?: AbortSignal,
  ): Promise<KubeObject | undefined> {
    const path = await this.pathOf(apiVersion, kind, namespace, name);
    try {
      return (await this.request("GET", path, { signal })) as KubeObject;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** LIST objects of a kind in a namespace, by label selector. */
  async list(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    labelSelector: string,
    signal?: AbortSignal,
  ): Promise<KubeObject[]> {
    const path = await this.pathOf(apiVersion, kind, namespace);
    return ((await this.request("GET", path, { query: { labelSelector }, signal })) as { items?: KubeObject[] }).items ?? [];
  }

  /** DELETE an object (background propagation); false when it was already gone. */
  async delete(apiVersion: string, kind: string, namespace: string | undefined, name: string, signal?: AbortSignal): Promise<boolean> {
    const path = await this.pathOf(apiVersion, kind, namespace, name);
    try {
      await this.request("DELETE", path, { query: { propagationPolicy: "Background" }, signal });
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return false;
      throw err;
    }
  }

  /** Sends one request; a non-2xx answer becomes a {@link KubeApiError} carrying the Status. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<unknown> {
    const base = await this.options();
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const headers: Record<string, string | number> = {
      ...(base.headers as Record<string, string>),
      Accept: "application/json",
    };
    if (payload) {
      headers["Content-Type"] = opts.contentType ?? "application/json";
      headers["Content-Length"] = payload.length;
    }
    const what = `${method} ${url.pathname}`;
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = https.request(url, { ...base, method, headers, signal: opts.signal }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(payload);
    }).catch((err: unknown) => {
      throw this.wrapTransport(err, what);
    });
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = { message: text.slice(0, 300) };
    }
    if (status < 200 || status > 299) throw new KubeApiError(status, body as KubeStatus, what);
    return body;
  }

  /**
   * TLS and auth options from client-node, with a keep-alive agent in place of its one-shot agent:
   * a deploy makes hundreds of requests, and a TLS handshake for each costs more than the request.
   */
  private options(): Promise<https.RequestOptions> {
    this.httpsOptions ??= (async () => {
      const opts: https.RequestOptions = {};
      await (await this.kc()).applyToHTTPSOptions(opts);
      (opts.agent as https.Agent | undefined)?.destroy();
      const { ca, cert, key, servername, rejectUnauthorized } = opts;
      this.agent = new https.Agent({ ca, cert, key, servername, rejectUnauthorized, keepAlive: true, maxSockets: 16 });
      return { ...opts, agent: this.agent };
    })();
    return this.httpsOptions;
  }

  /** Closes the connections this client keeps open. */
  close(): void {
    this.agent?.destroy();
  }

  private wrapTransport(err: unknown, what: string): ManentError {
    if (err instanceof ManentError) return err;
    const e = ManentError.from(err, Code.Unavailable);
    if (e.code === Code.Canceled) return e;
    const status = (err as { code?: unknown }).code;
    if (typeof status === "number" && status >= 400) {
      return new KubeApiError(status, statusBody((err as { body?: unknown }).body), what);
    }
    const tls = tlsFailure(err);
    if (tls) {
      // A certificate that does not verify today will not verify on a retry: say what to set.
      return new ManentError(
        Code.FailedPrecondition,
        `cluster ${this.name}: ${what}: cannot verify the API server's certificate (${tls}): ${this.hasCa ? "the CA in ca_secret did not sign it; put the cluster's CA (the token Secret's ca.crt) in that secret" : "set param ca_secret (or the target's label ca_secret) to a secret holding the cluster's CA, the token Secret's ca.crt"}`,
        { cause: err, details: { tls_error: tls } },
      );
    }
    return new ManentError(Code.Unavailable, `cluster ${this.name}: ${what}: ${e.message}`, { cause: err });
  }
}

/** The TLS verification code anywhere in an error's cause chain (fetch wraps it), if any. */
function tlsFailure(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && tlsVerifyCodes.has(code)) return code;
  }
  return undefined;
}

/** client-node's ApiException carries the Status as text or as an object. */
function statusBody(body: unknown): KubeStatus {
  if (typeof body === "string") {
    try {
      return JSON.parse(body) as KubeStatus;
    } catch {
      return { message: body.slice(0, 300) };
    }
  }
  return (body ?? {}) as KubeStatus;
}

function formatHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}
