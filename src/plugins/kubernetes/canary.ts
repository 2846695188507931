import { Code, ManentError } from "../../core/errors.js";
import { objectError } from "./apply.js";
import type { HeaderRoute } from "../../core/contract/index.js";
import type { ClusterClient } from "./cluster-client.js";
import { KubeApiError } from "./kube-api-error.js";
import type { KubeObject } from "./objects.js";

/**
 * The candidate of a percentage rollout on Kubernetes: for each Deployment of the release a
 * second Deployment `<name>-canary` beside the stable one, its pods labelled `manent.io/slot:
 * canary`; with a Gateway API HTTPRoute, a Service `<name>-canary` per Service selecting only
 * those pods, and the route's backendRefs weighted between the two. Without a route the candidate
 * pods also match the stable Service's selector, and the weight is their share of replicas.
 */
export const slotLabel = "manent.io/slot";
export const canarySuffix = "-canary";
export const routeApiVersion = "gateway.networking.k8s.io/v1";

interface DeploymentSpec {
  replicas?: number;
  selector?: { matchLabels?: Record<string, string> };
  template?: { metadata?: { labels?: Record<string, string> } };
}

export function canaryName(name: string): string {
  return `${name}${canarySuffix}`;
}

/** The candidate objects for the release's objects: Deployments, and Services when a route carries traffic. */
export function candidateObjects(objects: KubeObject[], withServices: boolean, replicas: (stable: KubeObject) => number): KubeObject[] {
  const out: KubeObject[] = [];
  for (const o of objects) {
    if (o.apiVersion === "apps/v1" && o.kind === "Deployment") {
      const c = structuredClone(o);
      c.metadata.name = canaryName(o.metadata.name);
      c.metadata.labels = { ...(c.metadata.labels ?? {}), [slotLabel]: "canary" };
      const spec = (c.spec ?? {}) as DeploymentSpec;
      spec.replicas = replicas(o);
      spec.selector = { ...(spec.selector ?? {}), matchLabels: { ...(spec.selector?.matchLabels ?? {}), [slotLabel]: "canary" } };
      spec.template = {
        ...(spec.template ?? {}),
        metadata: { ...(spec.template?.metadata ?? {}), labels: { ...(spec.template?.metadata?.labels ?? {}), [slotLabel]: "canary" } },
      };
      c.spec = spec;
      out.push(c);
    } else if (withServices && o.apiVersion === "v1" && o.kind === "Service") {
      const c = structuredClone(o);
      c.metadata.name = canaryName(o.metadata.name);
      c.metadata.labels = { ...(c.metadata.labels ?? {}), [slotLabel]: "canary" };
      const spec = (c.spec ?? {}) as { selector?: Record<string, string>; clusterIP?: string; clusterIPs?: string[] };
      spec.selector = { ...(spec.selector ?? {}), [slotLabel]: "canary" };
      delete spec.clusterIP;
      delete spec.clusterIPs;
      c.spec = spec;
      out.push(c);
    }
  }
  return out;
}

/** The stable Deployments' replicas (the live object's, else the manifest's, else 1). */
export function specReplicas(o: KubeObject | undefined): number {
  const r = (o?.spec as DeploymentSpec | undefined)?.replicas;
  return typeof r === "number" && r >= 0 ? r : 1;
}

/** Candidate replicas at `weight` with a route (the route carries the share): in proportion to the stable ones, rounded up, at least one (testers need a pod). */
export function canaryReplicas(stable: number, weight: number): number {
  return Math.max(1, Math.ceil((stable * weight) / 100));
}

/**
 * Without a route the share of the stable Service's endpoints is the share of pods, so the `n`
 * pods the stable Deployment had are divided: the candidate gets round(n·w/100) and the stable the
 * rest, as Argo Rollouts does without a traffic router. Between 0 and 100 each keeps at least one
 * pod (the candidate gets some traffic, the stable is not gone before the promote), so with one
 * pod both run one (50 %), and with n pods the share moves in steps of 1/n.
 */
export function replicaSplit(n: number, weight: number): { candidate: number; stable: number } {
  if (weight <= 0) return { candidate: 0, stable: n };
  if (weight >= 100) return { candidate: n, stable: 0 };
  const candidate = Math.min(Math.max(1, Math.round((n * weight) / 100)), Math.max(1, n - 1));
  return { candidate, stable: Math.max(1, n - candidate) };
}

/** The field manager of the stable Deployments' replicas while a canary without a route divides them. */
export const canaryFieldManager = "manent-canary";

/** Sets a stable Deployment's replicas (a merge patch, as `kubectl scale` would, by manent-canary). */
export async function scaleStable(
  client: ClusterClient,
  namespace: string,
  name: string,
  replicas: number,
  signal: AbortSignal,
): Promise<void> {
  const path = await client.pathOf("apps/v1", "Deployment", namespace, name);
  try {
    await client.request("PATCH", path, {
      query: { fieldManager: canaryFieldManager },
      body: { spec: { replicas } },
      contentType: "application/merge-patch+json",
      signal,
    });
  } catch (err) {
    throw objectError(client, { apiVersion: "apps/v1", kind: "Deployment", namespace, name }, "patch", err);
  }
}

/**
 * Gives a stable Deployment its `replicas` back and drops manent-canary's claim on them, so the
 * next server-side apply of the release owns `spec.replicas` again (with the claim left, a release
 * changing its replicas would conflict with manent-canary). False when there was nothing to do.
 */
export async function restoreStable(
  client: ClusterClient,
  namespace: string,
  name: string,
  replicas: number,
  signal: AbortSignal,
): Promise<boolean> {
  const live = await client.get("apps/v1", "Deployment", namespace, name, signal);
  if (!live) return false;
  const entries = (live.metadata.managedFields ?? []) as { manager?: string; operation?: string }[];
  const claimed = entries.findIndex((m) => m.manager === canaryFieldManager && m.operation === "Update");
  if (claimed < 0 && specReplicas(live) === replicas) return false;
  if (specReplicas(live) !== replicas) await scaleStable(client, namespace, name, replicas, signal);
  const path = await client.pathOf("apps/v1", "Deployment", namespace, name);
  // The entry is removed by index, guarded by a test op: the controllers may add entries (status)
  // between the read and the patch, which fails the test (422); then read again.
  for (let attempt = 1; ; attempt++) {
    const now = await client.get("apps/v1", "Deployment", namespace, name, signal);
    const i = ((now?.metadata.managedFields ?? []) as { manager?: string; operation?: string }[]).findIndex(
      (m) => m.manager === canaryFieldManager && m.operation === "Update",
    );
    if (i < 0) break;
    try {
      await client.request("PATCH", path, {
        body: [
          { op: "test", path: `/metadata/managedFields/${i}/manager`, value: canaryFieldManager },
          { op: "test", path: `/metadata/managedFields/${i}/operation`, value: "Update" },
          { op: "remove", path: `/metadata/managedFields/${i}` },
        ],
        contentType: "application/json-patch+json",
        signal,
      });
      break;
    } catch (err) {
      if (attempt < 5 && err instanceof KubeApiError && err.status === 422) continue;
      throw objectError(client, { apiVersion: "apps/v1", kind: "Deployment", namespace, name }, "patch", err);
    }
  }
  return true;
}

interface BackendRef {
  group?: string;
  kind?: string;
  name: string;
  namespace?: string;
  port?: number;
  weight?: number;
  [k: string]: unknown;
}
interface HeaderMatch {
  type?: string;
  name: string;
  value: string;
}
interface RouteFilter {
  type?: string;
  requestMirror?: { backendRef?: BackendRef; [k: string]: unknown };
  [k: string]: unknown;
}
interface RouteRule {
  matches?: { headers?: HeaderMatch[]; [k: string]: unknown }[];
  filters?: RouteFilter[];
  backendRefs?: BackendRef[];
  [k: string]: unknown;
}

const isService = (r: BackendRef): boolean => (r.group ?? "") === "" && (r.kind ?? "Service") === "Service";

/** Parses `X-Canary: always` into a header match. */
export function testerMatch(header: string): { type: "Exact"; name: string; value: string } {
  const i = header.indexOf(":");
  return { type: "Exact", name: header.slice(0, i).trim(), value: header.slice(i + 1).trim() };
}

/**
 * The match of a `set_header_route` step: a header exactly, or a cookie as a RegularExpression on
 * the `Cookie` header (the Gateway API has no cookie match; its standard CRD has RegularExpression
 * header matches, whose support is implementation-specific). The step's names and values are
 * letters, digits and `._~+/=:@-` only (src/core/rollout/traffic-steps.ts), so escaping `.` and `+`
 * makes the expression literal.
 */
export function headerRouteMatch(route: HeaderRoute): HeaderMatch {
  if (route.type === "header") return { type: "Exact", name: route.name, value: route.value };
  const literal = (v: string) => v.replace(/[.+]/g, (c) => `\\${c}`);
  return { type: "RegularExpression", name: "Cookie", value: `(^|;\\s*)${literal(route.name)}=${literal(route.value)}(;|$)` };
}

/** A rule whose every backend is a candidate Service: the tester rule or the header route manent adds. */
function candidateOnly(rule: RouteRule): boolean {
  const refs = rule.backendRefs ?? [];
  return refs.length > 0 && refs.every((r) => isService(r) && r.name.endsWith(canarySuffix));
}

/** The tester rule: candidate-only, matching the tester header alone (what routeRules writes for `testers`). */
function isTesterRule(rule: RouteRule, tester: { name: string; value: string }): boolean {
  const m = rule.matches ?? [];
  const h = m.length === 1 ? (m[0]!.headers ?? []) : [];
  return (
    candidateOnly(rule) &&
    h.length === 1 &&
    (h[0]!.type ?? "Exact") === "Exact" &&
    h[0]!.name.toLowerCase() === tester.name.toLowerCase() &&
    h[0]!.value === tester.value
  );
}

/** A RequestMirror filter manent added: copies to a candidate of `services`. */
function isCandidateMirror(f: RouteFilter, services: Set<string>): boolean {
  const ref = f.requestMirror?.backendRef;
  return f.type === "RequestMirror" && ref !== undefined && isCandidateOf(ref, services);
}

/** Whether the route sends anything to a candidate of `services`: a candidate backendRef or mirror, the tester rule or header route. */
export function routesToCandidate(rules: RouteRule[], services: Set<string>): boolean {
  return rules.some(
    (rule) =>
      candidateOnly(rule) ||
      (rule.backendRefs ?? []).some((ref) => isCandidateOf(ref, services)) ||
      (rule.filters ?? []).some((f) => isCandidateMirror(f, services)),
  );
}

const isCandidateOf = (ref: BackendRef, services: Set<string>): boolean =>
  isService(ref) && ref.name.endsWith(canarySuffix) && services.has(ref.name.slice(0, -canarySuffix.length));
const sameBackend = (a: BackendRef, b: BackendRef): boolean =>
  a.name === b.name && (a.namespace ?? "") === (b.namespace ?? "") && a.port === b.port && isService(a) === isService(b);
/** The Gateway API's largest backendRef weight. */
const maxRouteWeight = 1_000_000;

/**
 * The route's rules as they are without the candidate: the tester rule dropped, and each
 * candidate backendRef's weight given back to its stable sibling. This is what PrepareSlots
 * records, and what every weight is computed from.
 */
export function baseRules(rules: RouteRule[], services: Set<string>): RouteRule[] {
  return rules.filter((rule) => !candidateOnly(rule)).map((rule) => withoutMirror(mergeCandidates(rule, services), services));
}

/** The rule without manent's mirror filters (and without `filters` when none is left, as it was). */
function withoutMirror(rule: RouteRule, services: Set<string>): RouteRule {
  if (!(rule.filters ?? []).some((f) => isCandidateMirror(f, services))) return rule;
  const { filters, ...rest } = rule;
  const kept = (filters ?? []).filter((f) => !isCandidateMirror(f, services));
  return kept.length > 0 ? { ...rest, filters: kept } : rest;
}

/** The rule with a RequestMirror filter copying its requests to the candidate of its first stable Service. */
function withMirror(rule: RouteRule, services: Set<string>): RouteRule {
  const stable = (rule.backendRefs ?? []).find((r) => isService(r) && services.has(r.name));
  if (!stable) return rule;
  const backendRef: BackendRef = { name: canaryName(stable.name), ...(stable.port === undefined ? {} : { port: stable.port }) };
  if (stable.namespace !== undefined) backendRef.namespace = stable.namespace;
  return { ...rule, filters: [...(rule.filters ?? []), { type: "RequestMirror", requestMirror: { backendRef } }] };
}

function mergeCandidates(rule: RouteRule, services: Set<string>): RouteRule {
  const refs = rule.backendRefs ?? [];
  if (!refs.some((r) => isCandidateOf(r, services))) return rule;
  const out: BackendRef[] = [];
  for (const ref of refs) {
    if (isCandidateOf(ref, services)) continue;
    const cands =
      isService(ref) && services.has(ref.name)
        ? refs.filter((c) => isCandidateOf(c, services) && c.name === canaryName(ref.name) && c.port === ref.port)
        : [];
    out.push(cands.length === 0 ? ref : { ...ref, weight: cands.reduce((sum, c) => sum + (c.weight ?? 1), ref.weight ?? 1) });
  }
  return { ...rule, backendRefs: out };
}

/**
 * The rule as it was before the canary: its backendRefs as recorded at PrepareSlots when the rule
 * still has the same backends in the same proportions (so `80/20` comes back as `80/20`, not as a
 * multiple of it), otherwise as merged (someone changed the rule meanwhile: their proportions win).
 */
function restored(base: RouteRule, recorded: BackendRef[] | undefined): RouteRule {
  const refs = base.backendRefs ?? [];
  if (!recorded || recorded.length !== refs.length || !refs.every((r, i) => sameBackend(r, recorded[i]!))) return base;
  const sum = (list: BackendRef[]) => list.reduce((n, r) => n + (r.weight ?? 1), 0);
  const [a, b] = [sum(refs), sum(recorded)];
  const proportional = refs.every((r, i) => (r.weight ?? 1) * b === (recorded[i]!.weight ?? 1) * a);
  return proportional ? { ...base, backendRefs: recorded.map((r, i) => ({ ...refs[i]!, weight: r.weight })) } : base;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * Splits each stable backendRef's share of its rule between it and its candidate: a stable weight
 * S at candidate weight w becomes S·(100−w)/100 and S·w/100, the rule's other backends keeping
 * theirs. When those are not whole numbers, every weight of the rule is multiplied by the smallest
 * factor that makes them whole (1 at w=25 becomes 3 and 1; `other` 1 becomes 4); only when that
 * would pass the Gateway API's maximum weight (1,000,000) is the split rounded instead.
 */
function splitRule(rule: RouteRule, services: Set<string>, weight: number, keepCandidate: boolean): RouteRule {
  const refs = rule.backendRefs ?? [];
  const stable = (r: BackendRef) => isService(r) && services.has(r.name);
  if (!refs.some(stable) || (weight === 0 && !keepCandidate)) return rule;
  let k = 1;
  for (const r of refs.filter(stable)) {
    const need = 100 / gcd(((r.weight ?? 1) * weight) % 100, 100);
    k = (k * need) / gcd(k, need);
  }
  if (Math.max(...refs.map((r) => r.weight ?? 1)) * k > maxRouteWeight) k = 1;
  const out: BackendRef[] = [];
  for (const ref of refs) {
    const w = ref.weight ?? 1;
    if (!stable(ref)) {
      out.push(k === 1 ? ref : { ...ref, weight: w * k });
      continue;
    }
    const candidate = Math.round((w * k * weight) / 100);
    out.push({ ...ref, weight: w * k - candidate });
    if (weight > 0 || keepCandidate) out.push({ ...ref, name: canaryName(ref.name), weight: candidate });
  }
  return { ...rule, backendRefs: out };
}

/**
 * The route's rules with the candidate at `weight`, from the rules without the candidate (see
 * {@link baseRules}, exact as `recorded` when given): each stable backendRef's share is split with
 * a sibling ref to `<service>-canary` ({@link splitRule}); at weight 0 with `keepCandidate` false the
 * rules are the base ones. Before them, the tester rule (the `tester` header to the candidates only)
 * and the header route (a `set_header_route` match to the candidates only): each put first when set,
 * removed when null, kept as it is when undefined. `mirror` true adds a RequestMirror filter to the
 * candidate on each rule with a stable Service, false removes it, undefined keeps what is there.
 */
export function routeRules(
  rules: RouteRule[],
  services: Set<string>,
  weight: number,
  opts: {
    keepCandidate: boolean;
    tester: { name: string; value: string };
    testers: boolean | null | undefined;
    headerRoute?: HeaderRoute | null;
    mirror?: boolean;
    recorded?: (BackendRef[] | undefined)[];
  },
): RouteRule[] {
  const tester = rules.find((r) => isTesterRule(r, opts.tester));
  const headerRule = rules.find((r) => candidateOnly(r) && !isTesterRule(r, opts.tester));
  const mirror = opts.mirror ?? rules.some((r) => (r.filters ?? []).some((f) => isCandidateMirror(f, services)));
  const out = baseRules(rules, services).map((rule, i) => {
    const split = splitRule(restored(rule, opts.recorded?.[i]), services, weight, opts.keepCandidate);
    return mirror && (weight > 0 || opts.keepCandidate) ? withMirror(split, services) : split;
  });
  const candidateRefs = out
    .flatMap((r) => r.backendRefs ?? [])
    .filter((r) => isService(r) && r.name.endsWith(canarySuffix))
    .filter((r, i, all) => all.findIndex((x) => x.name === r.name && x.port === r.port) === i)
    .map((r) => ({ ...r, weight: 1 }));
  const first: RouteRule[] = [];
  if (opts.testers) {
    if (candidateRefs.length > 0) first.push({ matches: [{ headers: [{ type: "Exact", ...opts.tester }] }], backendRefs: candidateRefs });
  } else if (opts.testers === undefined && tester) {
    // The tester rule: kept as is unless the testers are set again or removed.
    first.push(tester);
  }
  if (opts.headerRoute) {
    if (candidateRefs.length > 0) first.push({ matches: [{ headers: [headerRouteMatch(opts.headerRoute)] }], backendRefs: candidateRefs });
  } else if (opts.headerRoute === undefined && headerRule) {
    first.push(headerRule);
  }
  return [...first, ...out];
}

/** The backendRefs of each rule as PrepareSlots records them (JSON in the rollout state). */
export function recordRules(rules: RouteRule[], services: Set<string>): string {
  return JSON.stringify(baseRules(rules, services).map((r) => r.backendRefs ?? []));
}

/** Reads what {@link recordRules} wrote; anything else (an older deploy's state) is none. */
export function recordedRules(text: string | undefined): (BackendRef[] | undefined)[] | undefined {
  if (!text) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    if (!Array.isArray(v)) return undefined;
    return v.map((refs) =>
      Array.isArray(refs) && refs.every((r) => typeof r === "object" && r !== null && typeof (r as BackendRef).name === "string")
        ? (refs as BackendRef[])
        : undefined,
    );
  } catch {
    return undefined;
  }
}

/** The candidate's weight on the route: the first weighted pair found. */
export function routeWeight(rules: RouteRule[], services: Set<string>): number {
  for (const rule of rules) {
    const refs = rule.backendRefs ?? [];
    const stable = refs.find((r) => isService(r) && services.has(r.name));
    const canary = stable && refs.find((r) => isService(r) && r.name === canaryName(stable.name));
    if (stable && canary) {
      const s = stable.weight ?? 1;
      const c = canary.weight ?? 1;
      return s + c === 0 ? 0 : Math.round((100 * c) / (s + c));
    }
    if (stable) return 0;
  }
  return 0;
}

/** Reads the HTTPRoute named in the params; a missing one is a permanent error naming it. */
export async function readRoute(
  client: ClusterClient,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<KubeObject & { spec?: { rules?: RouteRule[] } }> {
  const ref = { apiVersion: routeApiVersion, kind: "HTTPRoute", namespace, name };
  let route: KubeObject | undefined;
  try {
    route = await client.get(routeApiVersion, "HTTPRoute", namespace, name, signal);
  } catch (err) {
    throw objectError(client, ref, "get", err);
  }
  if (!route) {
    throw new ManentError(
      Code.FailedPrecondition,
      `cluster ${client.name}: HTTPRoute ${namespace}/${name} (param traffic_route) does not exist`,
      {
        details: { param: "traffic_route" },
      },
    );
  }
  return route;
}

/** Replaces the route's rules (a JSON merge patch replaces the whole list, as Gateway API rules are atomic). */
export async function writeRouteRules(
  client: ClusterClient,
  namespace: string,
  name: string,
  rules: RouteRule[],
  opts: { dryRun?: boolean; signal: AbortSignal },
): Promise<void> {
  const path = await client.pathOf(routeApiVersion, "HTTPRoute", namespace, name);
  try {
    await client.request("PATCH", path, {
      query: { fieldManager: "manent-canary", dryRun: opts.dryRun ? "All" : undefined },
      body: { apiVersion: routeApiVersion, kind: "HTTPRoute", metadata: { name, namespace }, spec: { rules } },
      contentType: "application/merge-patch+json",
      signal: opts.signal,
    });
  } catch (err) {
    throw objectError(client, { apiVersion: routeApiVersion, kind: "HTTPRoute", namespace, name }, "patch", err);
  }
}

/** The candidate objects manent left in the namespace for this application and environment (by label). */
export async function listCandidates(
  client: ClusterClient,
  namespace: string,
  selector: string,
  signal: AbortSignal,
): Promise<KubeObject[]> {
  const out: KubeObject[] = [];
  for (const [apiVersion, kind] of [
    ["apps/v1", "Deployment"],
    ["v1", "Service"],
  ] as const) {
    const path = await client.pathOf(apiVersion, kind, namespace);
    const list = (await client.request("GET", path, { query: { labelSelector: `${selector},${slotLabel}=canary` }, signal })) as {
      items?: KubeObject[];
    };
    for (const o of list.items ?? []) out.push({ ...o, apiVersion, kind });
  }
  return out;
}

/** The stable Deployments' replicas, by name (the candidates excluded). */
export async function stableReplicas(
  client: ClusterClient,
  namespace: string,
  selector: string,
  signal: AbortSignal,
): Promise<Map<string, number>> {
  const path = await client.pathOf("apps/v1", "Deployment", namespace);
  const list = (await client.request("GET", path, { query: { labelSelector: `${selector},${slotLabel}!=canary` }, signal })) as {
    items?: KubeObject[];
  };
  return new Map((list.items ?? []).map((o) => [o.metadata.name, specReplicas(o)]));
}
