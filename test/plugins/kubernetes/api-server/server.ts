import https from "node:https";
import type { AddressInfo } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseYaml } from "yaml";
import { builtinResources, qualifiedName, type ResourceInfo } from "./catalogue.js";
import { generateServerCerts } from "./certs.js";
import { Controllers, type ControllerOptions } from "./controllers.js";
import { failure, HttpStatusError, success } from "./status.js";
import { ObjectStore } from "./store.js";

/** An RBAC rule, as in a Role; `namespaces` limits it (a RoleBinding), absent = cluster-wide. */
export interface RbacRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  namespaces?: string[];
}

export interface TokenInfo {
  user: string;
  rules: RbacRule[];
}

export interface TestApiServerOptions {
  /** Bearer token → identity and permissions. */
  tokens: Record<string, TokenInfo>;
  /** Namespaces that exist at start. */
  namespaces?: string[];
  gitVersion?: string;
  controller?: Partial<ControllerOptions>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType?: string;
  user?: string;
  /** performance.now() at arrival, to tell the order of requests across servers. */
  at: number;
}

type Obj = Record<string, unknown> & { metadata: Record<string, unknown> };

/** The tutorial's Role for the `manent` service account, limited to namespace `ns`. */
export function tutorialRole(ns: string): RbacRule[] {
  const rw = ["get", "list", "watch", "create", "update", "patch", "delete"];
  return [
    { apiGroups: [""], resources: ["configmaps", "services"], verbs: rw, namespaces: [ns] },
    { apiGroups: ["apps"], resources: ["deployments", "replicasets"], verbs: rw, namespaces: [ns] },
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"], namespaces: [ns] },
  ];
}

export const clusterAdmin: RbacRule[] = [{ apiGroups: ["*"], resources: ["*"], verbs: ["*"] }];

/**
 * A Kubernetes API server for tests: HTTPS on 127.0.0.1 with its own CA, bearer tokens with an
 * RBAC table, discovery, server-side apply with field managers, dryRun=All, and controllers for
 * rollouts. See README.md for what it does not do.
 */
export class TestApiServer {
  readonly requests: RecordedRequest[] = [];
  readonly store: ObjectStore;
  private readonly resources: ResourceInfo[] = builtinResources();
  private readonly controllers: Controllers;
  private constructor(
    private readonly server: https.Server,
    readonly caPem: string,
    private readonly opts: TestApiServerOptions,
  ) {
    this.controllers = new Controllers(
      (this.store = new ObjectStore((c) => this.controllers.onChange(c))),
      { stepMs: 5, msPerSecond: 2, failingImage: /does-not-exist/, nodes: 2, ...opts.controller },
      (crd) => this.registerCrd(crd),
    );
    server.on("request", (req: IncomingMessage, res: ServerResponse) => void this.handle(req, res));
    const ns = this.resource("", "v1", "namespaces")!;
    for (const name of opts.namespaces ?? []) {
      this.store.apply(ns, undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name } }, "kubectl", false, false);
    }
  }

  static async start(opts: TestApiServerOptions): Promise<TestApiServer> {
    const certs = await generateServerCerts();
    const server = https.createServer({ cert: certs.certPem, key: certs.keyPem });
    const api = new TestApiServer(server, certs.caPem, opts);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return api;
  }

  get host(): string {
    return "127.0.0.1";
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get gitVersion(): string {
    return this.opts.gitVersion ?? "v1.31.4+manent-test";
  }

  async close(): Promise<void> {
    this.controllers.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  resource(group: string, version: string, name: string): ResourceInfo | undefined {
    return this.resources.find((r) => r.group === group && r.version === version && r.name === name);
  }

  /** A stored object, for assertions (`group` "" for the core group). */
  get(group: string, resource: string, ns: string | undefined, name: string): Obj | undefined {
    const res = this.resources.find((r) => r.group === group && r.name === resource);
    return res ? this.store.get(res, ns, name) : undefined;
  }

  list(group: string, resource: string, ns: string | undefined): Obj[] {
    const res = this.resources.find((r) => r.group === group && r.name === resource);
    return res ? this.store.list(res, ns) : [];
  }

  private registerCrd(crd: Obj): void {
    const spec = crd.spec as { group: string; scope: string; names: { plural: string; singular?: string; kind: string }; versions: { name: string; served: boolean }[] };
    for (const v of spec.versions.filter((x) => x.served)) {
      if (this.resource(spec.group, v.name, spec.names.plural)) continue;
      this.resources.push({
        group: spec.group,
        version: v.name,
        name: spec.names.plural,
        singularName: spec.names.singular ?? spec.names.kind.toLowerCase(),
        kind: spec.names.kind,
        namespaced: spec.scope !== "Cluster",
        verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
      });
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    const rec: RecordedRequest = { method: req.method ?? "GET", path: url.pathname, query: Object.fromEntries(url.searchParams), at: performance.now() };
    if (req.headers["content-type"]) rec.contentType = req.headers["content-type"];
    this.requests.push(rec);
    try {
      const body = await readBody(req);
      const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? "");
      const who = auth ? this.opts.tokens[auth[1]!] : undefined;
      if (!who) throw failure(401, "Unauthorized", "Unauthorized");
      rec.user = who.user;
      const { status, payload } = this.route(rec, url, body, who, req.headers["content-type"] ?? "");
      send(res, status, payload);
    } catch (err) {
      if (err instanceof HttpStatusError) send(res, err.body.code, err.body);
      else send(res, 500, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: String(err), reason: "InternalError", code: 500 });
    }
  }

  private route(rec: RecordedRequest, url: URL, body: string, who: TokenInfo, contentType: string): { status: number; payload: unknown } {
    const p = url.pathname.replace(/\/+$/, "");
    if (rec.method === "GET") {
      const discovery = this.discovery(p);
      if (discovery) return { status: 200, payload: discovery };
    }
    const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))\/(.+)$/.exec(p);
    if (!m) throw failure(404, "NotFound", "the server could not find the requested resource");
    const group = m[2] ?? "";
    const version = m[1] ?? m[3]!;
    const segs = m[4]!.split("/").map(decodeURIComponent);
    let ns: string | undefined;
    let resName: string;
    let name: string | undefined;
    if (segs[0] === "namespaces" && segs.length >= 3) {
      ns = segs[1];
      resName = segs[2]!;
      name = segs[3];
      if (segs.length > 4) throw failure(404, "NotFound", "the server could not find the requested resource");
    } else {
      resName = segs[0]!;
      name = segs[1];
      if (segs.length > 2) throw failure(404, "NotFound", "the server could not find the requested resource");
    }
    const resource = this.resource(group, version, resName);
    if (!resource || (ns !== undefined && !resource.namespaced)) throw failure(404, "NotFound", "the server could not find the requested resource");

    const verb = verbOf(rec.method, name, url.searchParams.get("watch") === "true");
    this.authorize(who, verb, resource, ns, name);
    const dryRun = url.searchParams.get("dryRun");
    if (dryRun !== null && dryRun !== "All") {
      throw failure(400, "BadRequest", `dryRun: Unsupported value: "${dryRun}": supported values: "All"`);
    }

    switch (rec.method) {
      case "GET": {
        if (name !== undefined) {
          const obj = this.store.get(resource, ns, name);
          if (!obj) throw failure(404, "NotFound", `${qualifiedName(resource)} "${name}" not found`, { name, group, kind: resName });
          return { status: 200, payload: obj };
        }
        const items = this.store.list(resource, ns).filter(selects(url.searchParams.get("labelSelector")));
        return {
          status: 200,
          payload: { apiVersion: group ? `${group}/${version}` : version, kind: `${resource.kind}List`, metadata: { resourceVersion: this.store.currentResourceVersion() }, items },
        };
      }
      case "PATCH": {
        if (name === undefined) throw failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        if (resource.namespaced) this.requireNamespace(ns!);
        const type = contentType.split(";")[0]!.trim();
        if (type === "application/apply-patch+yaml") {
          const manager = url.searchParams.get("fieldManager");
          if (!manager) throw failure(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
          const obj = parseObject(body, "yaml");
          this.checkIdentity(obj, resource, group, version, ns, name);
          validate(obj, resource);
          if (!this.store.get(resource, ns, name)) this.authorize(who, "create", resource, ns, name);
          const out = this.store.apply(resource, ns, obj, manager, url.searchParams.get("force") === "true", dryRun === "All");
          return { status: out.created ? 201 : 200, payload: out.obj };
        }
        if (type === "application/merge-patch+json") {
          const patch = parseObject(body, "json");
          const out = this.store.mergePatch(resource, ns, name, patch, url.searchParams.get("fieldManager") ?? "unknown", dryRun === "All");
          return { status: 200, payload: out };
        }
        throw failure(415, "UnsupportedMediaType", `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`);
      }
      case "DELETE": {
        if (name === undefined) throw failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        const obj = this.store.delete(resource, ns, name, dryRun === "All");
        if (resource.kind === "CustomResourceDefinition" && dryRun !== "All") this.unregisterCrd(obj);
        return { status: 200, payload: success({ name, group, kind: resName, uid: String(obj.metadata.uid) }) };
      }
      default:
        throw failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    }
  }

  private unregisterCrd(crd: Obj): void {
    const spec = crd.spec as { group: string; names: { plural: string } };
    for (let i = this.resources.length - 1; i >= 0; i--) {
      const r = this.resources[i]!;
      if (r.group === spec.group && r.name === spec.names.plural) this.resources.splice(i, 1);
    }
  }

  private requireNamespace(ns: string): void {
    if (!this.store.get(this.resource("", "v1", "namespaces")!, undefined, ns)) {
      throw failure(404, "NotFound", `namespaces "${ns}" not found`, { name: ns, kind: "namespaces" });
    }
  }

  private checkIdentity(obj: Obj, res: ResourceInfo, group: string, version: string, ns: string | undefined, name: string): void {
    const gv = group ? `${group}/${version}` : version;
    if (obj.apiVersion !== gv || obj.kind !== res.kind) {
      throw failure(400, "BadRequest", `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${gv}) or kind (${String(obj.kind)}) is not ${res.kind}`);
    }
    if (obj.metadata.name !== name) {
      throw failure(400, "BadRequest", `the name of the object (${String(obj.metadata.name)}) does not match the name on the URL (${name})`);
    }
    if (res.namespaced && obj.metadata.namespace !== undefined && obj.metadata.namespace !== ns) {
      throw failure(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
    }
  }

  private authorize(who: TokenInfo, verb: string, res: ResourceInfo, ns: string | undefined, name: string | undefined): void {
    const ok = who.rules.some(
      (r) =>
        (r.apiGroups.includes("*") || r.apiGroups.includes(res.group)) &&
        (r.resources.includes("*") || r.resources.includes(res.name)) &&
        (r.verbs.includes("*") || r.verbs.includes(verb)) &&
        (r.namespaces === undefined || (ns !== undefined && r.namespaces.includes(ns))),
    );
    if (ok) return;
    const subject = name === undefined ? qualifiedName(res) : `${qualifiedName(res)} "${name}"`;
    const scope = ns === undefined ? "at the cluster scope" : `in the namespace "${ns}"`;
    throw failure(403, "Forbidden", `${subject} is forbidden: User "${who.user}" cannot ${verb} resource "${res.name}" in API group "${res.group}" ${scope}`, {
      ...(name === undefined ? {} : { name }),
      group: res.group,
      kind: res.name,
    });
  }

  private discovery(p: string): unknown {
    if (p === "/version") {
      const m = /^v(\d+)\.(\d+)/.exec(this.gitVersion);
      return {
        major: m?.[1] ?? "1",
        minor: m?.[2] ?? "31",
        gitVersion: this.gitVersion,
        gitCommit: "0000000000000000000000000000000000000000",
        gitTreeState: "clean",
        buildDate: "2024-12-10T00:00:00Z",
        goVersion: "go1.22.9",
        compiler: "gc",
        platform: "linux/amd64",
      };
    }
    if (p === "/api") return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: `127.0.0.1:${this.port}` }] };
    if (p === "/apis") {
      const groups = new Map<string, string[]>();
      for (const r of this.resources) {
        if (!r.group) continue;
        const vs = groups.get(r.group) ?? [];
        if (!vs.includes(r.version)) vs.push(r.version);
        groups.set(r.group, vs);
      }
      return {
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: [...groups].map(([name, vs]) => ({
          name,
          versions: vs.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
          preferredVersion: { groupVersion: `${name}/${vs[0]}`, version: vs[0] },
        })),
      };
    }
    const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(p);
    if (!m) return undefined;
    const group = m[2] ?? "";
    const version = m[1] ?? m[3]!;
    const rs = this.resources.filter((r) => r.group === group && r.version === version);
    if (rs.length === 0) throw failure(404, "NotFound", "the server could not find the requested resource");
    return {
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: group ? `${group}/${version}` : version,
      resources: rs.flatMap((r) => [
        { name: r.name, singularName: r.singularName, namespaced: r.namespaced, kind: r.kind, verbs: r.verbs },
        // Real discovery lists subresources too; clients must skip them.
        { name: `${r.name}/status`, singularName: "", namespaced: r.namespaced, kind: r.kind, verbs: ["get", "patch", "update"] },
      ]),
    };
  }
}

function verbOf(method: string, name: string | undefined, watch: boolean): string {
  switch (method) {
    case "GET":
      return name === undefined ? (watch ? "watch" : "list") : "get";
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return name === undefined ? "deletecollection" : "delete";
    default:
      return method.toLowerCase();
  }
}

/** Equality-based label selectors (`a=b,c!=d`), the part the tests use. */
function selects(selector: string | null): (o: Obj) => boolean {
  if (!selector) return () => true;
  const terms = selector.split(",").map((t) => /^([^!=]+)(!=|==|=)(.*)$/.exec(t.trim()));
  return (o) => {
    const labels = (o.metadata.labels ?? {}) as Record<string, string>;
    return terms.every((t) => t !== null && (t[2] === "!=" ? labels[t[1]!] !== t[3] : labels[t[1]!] === t[3]));
  };
}

function parseObject(body: string, format: "yaml" | "json"): Obj {
  let v: unknown;
  try {
    // JSON is YAML; try the fast parser first, as the real server's decoder sniffs JSON too.
    v = format === "yaml" ? parseJsonOrYaml(body) : JSON.parse(body);
  } catch (err) {
    throw failure(400, "BadRequest", `error decoding ${format}: ${(err as Error).message}`);
  }
  if (typeof v !== "object" || v === null || typeof (v as Obj).metadata !== "object") {
    throw failure(400, "BadRequest", "Object 'metadata' is missing");
  }
  return v as Obj;
}

function parseJsonOrYaml(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return parseYaml(body);
  }
}

const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** The validation the plugin can trip: label values, and the 1 MiB ConfigMap limit. */
function validate(obj: Obj, res: ResourceInfo): void {
  const name = String(obj.metadata.name);
  for (const [k, v] of Object.entries((obj.metadata.labels ?? {}) as Record<string, unknown>)) {
    if (typeof v !== "string" || v.length > 63 || !labelValue.test(v)) {
      throw failure(422, "Invalid", `${res.kind} "${name}" is invalid: metadata.labels: Invalid value: "${String(v)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`, {
        name,
        group: res.group,
        kind: res.kind,
        causes: [{ reason: "FieldValueInvalid", message: `Invalid value: "${String(v)}"`, field: `metadata.labels` }],
      });
    }
    void k;
  }
  if (res.kind === "ConfigMap") {
    let size = 0;
    for (const [k, v] of Object.entries((obj.data ?? {}) as Record<string, string>)) size += k.length + Buffer.byteLength(v);
    for (const [k, v] of Object.entries((obj.binaryData ?? {}) as Record<string, string>)) size += k.length + Buffer.from(v, "base64").length;
    if (size > 1024 * 1024) {
      throw failure(422, "Invalid", `ConfigMap "${name}" is invalid: []: Too long: must have at most 1048576 bytes`, {
        name,
        kind: "ConfigMap",
        causes: [{ reason: "FieldValueTooLong", message: "Too long: must have at most 1048576 bytes", field: "[]" }],
      });
    }
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function send(res: ServerResponse, status: number, payload: unknown): void {
  const text = JSON.stringify(payload);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
