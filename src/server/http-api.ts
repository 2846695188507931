import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { Registry } from "prom-client";
import { capabilitiesOf } from "../core/contract/index.js";
import { validate } from "../core/config/index.js";
import { terminalStatuses, type DeployStore } from "../core/engine/deploy-store.js";
import type { Engine } from "../core/engine/engine.js";
import type { PluginRegistry } from "../core/engine/plugin-registry.js";
import type { Submission } from "../core/engine/resolve.js";
import { Code, ManentError } from "../core/errors.js";
import type { Logger } from "../core/contract/index.js";
import { authorize, type Authenticator, type Caller } from "./auth.js";
import { httpStatus } from "./http-status.js";

export interface ApiDeps {
  engine: Engine;
  store: DeployStore;
  plugins: PluginRegistry;
  auth: Authenticator;
  metrics: Registry;
  logger: Logger;
  /** Checks the database for /healthz. */
  ping: () => Promise<void>;
}

const submitBody = z.strictObject({
  descriptor: z.record(z.string(), z.unknown()),
  descriptor_file: z.string().min(1).default("descriptor"),
  dry_run: z.boolean().default(false),
  overrides: z
    .strictObject({ version: z.string().optional(), source: z.string().optional(), sha256: z.string().optional() })
    .default({}),
});
const rollbackBody = z.strictObject({
  descriptor: z.record(z.string(), z.unknown()),
  descriptor_file: z.string().min(1).default("descriptor"),
  to: z.string().min(1).optional(),
});

const maxBody = 1 << 20;

/**
 * The JSON HTTP API: `/api/v1/deploys` (submit, list, get, cancel), `/api/v1/rollbacks`,
 * `/api/v1/plugins`, plus `/healthz` and `/metrics`. Errors are `{"error": {code, message, details}}`.
 */
export function createApiHandler(deps: ApiDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(deps, req, res).catch((err: unknown) => {
      const e = ManentError.from(err, Code.Internal);
      if (e.code === Code.Internal || e.code === Code.Unknown) deps.logger.error("request failed", { path: req.url, error: e.message });
      send(res, httpStatus(e.code), { error: e.toJSON() });
    });
  };
}

async function handle(deps: ApiDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://manent");
  const path = url.pathname;
  const method = req.method ?? "GET";

  if (path === "/healthz" && method === "GET") {
    await deps.ping().catch((err: unknown) => {
      throw new ManentError(Code.Unavailable, `database unreachable: ${ManentError.from(err).message}`);
    });
    return send(res, 200, { status: "ok" });
  }
  if (path === "/metrics" && method === "GET") {
    res.writeHead(200, { "content-type": deps.metrics.contentType });
    res.end(await deps.metrics.metrics());
    return;
  }
  if (!path.startsWith("/api/v1/")) throw new ManentError(Code.NotFound, `no route ${method} ${path}`);
  const caller = deps.auth.authenticate(req.headers.authorization);

  if (path === "/api/v1/deploys" && method === "POST") {
    const body = validate(await readJson(req), "request body", submitBody);
    const submission: Submission = {
      kind: body.dry_run ? "dry_run" : "deploy",
      descriptor: body.descriptor,
      descriptorFile: body.descriptor_file,
      overrides: dropUndefined(body.overrides),
    };
    authorize(caller, tenantOf(body.descriptor));
    const out = await deps.engine.submit(submission, caller.name);
    return send(res, 202, { ...out, status: "queued" });
  }
  if (path === "/api/v1/rollbacks" && method === "POST") {
    const body = validate(await readJson(req), "request body", rollbackBody);
    authorize(caller, tenantOf(body.descriptor));
    const submission: Submission = {
      kind: "rollback",
      descriptor: body.descriptor,
      descriptorFile: body.descriptor_file,
      ...(body.to !== undefined && { to: body.to }),
    };
    const out = await deps.engine.submit(submission, caller.name);
    return send(res, 202, { ...out, status: "queued" });
  }
  if (path === "/api/v1/deploys" && method === "GET") {
    const q = url.searchParams;
    const tenant = caller.tenant === "*" ? (q.get("tenant") ?? undefined) : caller.tenant;
    const limit = Math.min(Number(q.get("limit") ?? 50) || 50, 1000);
    const deploys = await deps.store.listDeploys({
      ...(tenant !== undefined && { tenant }),
      ...optional("application", q.get("application")),
      ...optional("environment", q.get("environment")),
      ...optional("artifact", q.get("artifact")),
      limit,
    });
    return send(res, 200, { deploys });
  }
  const one = /^\/api\/v1\/deploys\/([0-9a-f-]{36})(\/cancel)?$/.exec(path);
  if (one) {
    const id = one[1]!;
    let deploy = await visibleDeploy(deps, caller, id);
    if (!one[2] && method === "GET") {
      // ?wait=N: answer when the deploy has ended, or after N seconds (long poll).
      const waitMs = Math.min(Number(url.searchParams.get("wait") ?? 0) || 0, 300) * 1000;
      const deadline = Date.now() + waitMs;
      while (!terminalStatuses.has(deploy.status) && Date.now() < deadline && !req.socket.destroyed) {
        await new Promise((r) => setTimeout(r, 100));
        deploy = (await deps.store.getDeploy(id)) ?? deploy;
      }
      return send(res, 200, deploy);
    }
    if (one[2] && method === "POST") {
      await deps.engine.cancel(id);
      return send(res, 200, await deps.store.getDeploy(id));
    }
  }
  if (path === "/api/v1/plugins" && method === "GET") return send(res, 200, { plugins: await listPlugins(deps) });
  throw new ManentError(Code.NotFound, `no route ${method} ${path}`);
}

async function visibleDeploy(deps: ApiDeps, caller: Caller, id: string) {
  const deploy = await deps.store.getDeploy(id);
  // Another tenant's deploy is reported as missing, not forbidden: its existence is not the caller's business.
  if (!deploy || (caller.tenant !== "*" && caller.tenant !== deploy.tenant)) throw new ManentError(Code.NotFound, `deploy ${id} not found`);
  return deploy;
}

/** Plugins and their capabilities, without starting external processes: theirs are as of their last start. */
async function listPlugins(deps: ApiDeps) {
  const known = await deps.store.loadCapabilities();
  return Promise.all(
    deps.plugins.list().map(async (p) => {
      if (p.kind === "builtin") return { name: p.name, kind: p.kind, capabilities: capabilitiesOf(await p.deployer()) };
      const seen = known.get(p.name);
      return { name: p.name, kind: p.kind, capabilities: seen?.capabilities ?? null, capabilities_as_of: seen?.updated_at ?? null };
    }),
  );
}

function tenantOf(descriptor: Record<string, unknown>): string {
  return typeof descriptor.tenant === "string" ? descriptor.tenant : "untenanted";
}

function optional<K extends string>(key: K, value: string | null): Partial<Record<K, string>> {
  return value === null ? {} : ({ [key]: value } as Record<K, string>);
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBody) throw new ManentError(Code.InvalidArgument, "request body: larger than 1 MiB");
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    throw new ManentError(Code.InvalidArgument, "request body: not valid JSON");
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
