import { setTimeout as sleep } from "node:timers/promises";
import { Code, ManentError, permanent } from "../../core/errors.js";
import { objectError } from "./apply.js";
import type { ClusterClient } from "./cluster-client.js";
import { KubeApiError } from "./kube-api-error.js";
import { describeRef, refOf, type KubeObject } from "./objects.js";

/** The kinds whose rollout a deploy waits for. */
export const rolloutKinds = new Set(["Deployment", "StatefulSet", "DaemonSet"]);

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

type Progress = { done: true } | { done: false; waiting: string } | { stuck: string };

/** Whether a live object's rollout is complete, the same tests `kubectl rollout status` makes. */
export function rolloutProgress(live: KubeObject): Progress {
  const spec = (live.spec ?? {}) as Record<string, unknown>;
  const status = (live.status ?? {}) as Record<string, unknown>;
  const generation = Number(live.metadata.generation ?? 0);
  const observed = Number(status.observedGeneration ?? 0);
  if (observed < generation) return { done: false, waiting: "waiting for the controller to observe the new generation" };
  const n = (k: string) => Number(status[k] ?? 0);
  switch (live.kind) {
    case "Deployment": {
      const conditions = (status.conditions ?? []) as Condition[];
      const progressing = conditions.find((c) => c.type === "Progressing");
      if (progressing?.reason === "ProgressDeadlineExceeded") return { stuck: progressing.message ?? "progress deadline exceeded" };
      const want = Number(spec.replicas ?? 1);
      if (n("updatedReplicas") < want) return { done: false, waiting: `${n("updatedReplicas")} of ${want} replicas updated` };
      if (n("replicas") > n("updatedReplicas"))
        return { done: false, waiting: `${n("replicas") - n("updatedReplicas")} old replicas pending termination` };
      if (n("availableReplicas") < n("updatedReplicas"))
        return { done: false, waiting: `${n("availableReplicas")} of ${n("updatedReplicas")} updated replicas available` };
      return { done: true };
    }
    case "StatefulSet": {
      if ((spec.updateStrategy as { type?: string } | undefined)?.type === "OnDelete") return { done: true };
      const want = Number(spec.replicas ?? 1);
      if (n("readyReplicas") < want) return { done: false, waiting: `${n("readyReplicas")} of ${want} pods ready` };
      if (n("updatedReplicas") < want) return { done: false, waiting: `${n("updatedReplicas")} of ${want} pods updated` };
      if (status.updateRevision !== status.currentRevision)
        return { done: false, waiting: "waiting for the update revision to become current" };
      return { done: true };
    }
    case "DaemonSet": {
      const want = n("desiredNumberScheduled");
      if (n("updatedNumberScheduled") < want) return { done: false, waiting: `${n("updatedNumberScheduled")} of ${want} pods updated` };
      if (n("numberAvailable") < want) return { done: false, waiting: `${n("numberAvailable")} of ${want} pods available` };
      return { done: true };
    }
    default:
      return { done: true };
  }
}

/**
 * Waits until every Deployment, StatefulSet and DaemonSet among `objs` has rolled out. A
 * Deployment past its progress deadline fails at once and permanently: retrying cannot make a
 * missing image appear, and the rollback should start now rather than after `wait_timeout`.
 */
export async function waitForRollouts(client: ClusterClient, objs: KubeObject[], timeoutMs: number, signal: AbortSignal): Promise<void> {
  let pending = objs.filter((o) => rolloutKinds.has(o.kind));
  if (pending.length === 0 || timeoutMs === 0) return;
  const deadline = Date.now() + timeoutMs;
  const host = client.name;
  const last = new Map<KubeObject, string>();
  const canList = new Map<string, boolean>();
  let delay = 50;
  for (;;) {
    const still: KubeObject[] = [];
    const lives = await liveObjects(client, pending, canList, signal);
    for (const [j, obj] of pending.entries()) {
      const what = describeRef(refOf(obj));
      const live = lives[j];
      if (!live) throw new ManentError(Code.NotFound, `cluster ${host}: ${what}: disappeared while waiting for its rollout`);
      const p = rolloutProgress(live);
      if ("stuck" in p) throw permanent(new ManentError(Code.Aborted, `cluster ${host}: ${what}: rollout stuck: ${p.stuck}`));
      if (!p.done) {
        still.push(obj);
        last.set(obj, p.waiting);
      }
    }
    pending = still;
    if (pending.length === 0) return;
    if (Date.now() + delay > deadline) {
      const obj = pending[0]!;
      throw new ManentError(
        Code.DeadlineExceeded,
        `cluster ${host}: ${describeRef(refOf(obj))}: rollout not complete after wait_timeout ${timeoutMs < 1000 ? `${timeoutMs}ms` : `${Math.round(timeoutMs / 1000)}s`}: ${last.get(obj)}${pending.length > 1 ? ` (and ${pending.length - 1} more workloads)` : ""}`,
      );
    }
    await sleep(delay, undefined, { signal });
    delay = Math.min(Math.round(delay * 1.5), maxPollDelayMs);
  }
}

/** GETs in flight at once when objects are read one by one. */
const pollConcurrency = 8;
/** The longest pause between two looks: a round of many workloads costs one LIST, so it can be short. */
const maxPollDelayMs = 1000;

/**
 * The live state of `objs` (undefined: gone). Workloads of one kind and namespace that carry
 * manent's application and environment labels are read by one LIST with that selector (a release
 * of 50 Deployments: one request per round instead of 50); the others, one the LIST did not return
 * (its labels changed) and every object when the token may not list (403, remembered per group)
 * are read by GETs, a few at a time.
 */
async function liveObjects(
  client: ClusterClient,
  objs: KubeObject[],
  canList: Map<string, boolean>,
  signal: AbortSignal,
): Promise<(KubeObject | undefined)[]> {
  const out = new Array<KubeObject | undefined>(objs.length);
  const found = new Set<number>();
  const groups = new Map<string, number[]>();
  objs.forEach((o, i) => {
    const selector = ownerSelector(o);
    if (!selector) return;
    const key = `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ""}|${selector}`;
    groups.set(key, [...(groups.get(key) ?? []), i]);
  });
  await Promise.all(
    [...groups].map(async ([key, at]) => {
      if (at.length < 2 || canList.get(key) === false) return;
      const o = objs[at[0]!]!;
      let items: KubeObject[];
      try {
        items = await client.list(o.apiVersion, o.kind, o.metadata.namespace, ownerSelector(o)!, signal);
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 403) {
          canList.set(key, false);
          return;
        }
        throw objectError(client, refOf(o), "list", err);
      }
      const byName = new Map(items.map((item) => [item.metadata.name, item]));
      for (const i of at) {
        const live = byName.get(objs[i]!.metadata.name);
        if (live) {
          // A LIST's items carry no apiVersion and kind: rolloutProgress needs the kind.
          out[i] = { ...live, apiVersion: o.apiVersion, kind: o.kind };
          found.add(i);
        }
      }
    }),
  );
  const rest = objs.flatMap((_, i) => (found.has(i) ? [] : [i]));
  for (let k = 0; k < rest.length; k += pollConcurrency) {
    const batch = rest.slice(k, k + pollConcurrency);
    const lives = await Promise.all(
      batch.map((i) => {
        const o = objs[i]!;
        return client.get(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name, signal).catch((err: unknown) => {
          throw objectError(client, refOf(o), "get", err);
        });
      }),
    );
    batch.forEach((i, j) => (out[i] = lives[j]));
  }
  return out;
}

/** The selector of manent's application and environment labels an object carries, if it carries both. */
function ownerSelector(o: KubeObject): string | undefined {
  const labels = o.metadata.labels ?? {};
  const app = labels["manent.io/application"];
  const env = labels["manent.io/environment"];
  return app !== undefined && env !== undefined ? `manent.io/application=${app},manent.io/environment=${env}` : undefined;
}

/** Waits until CRDs report `Established`, so their custom resources can be applied. */
export async function waitForCrds(client: ClusterClient, crds: KubeObject[], timeoutMs: number, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + Math.max(timeoutMs, 10_000);
  for (const crd of crds) {
    let delay = 50;
    for (;;) {
      const live = await client.get(crd.apiVersion, crd.kind, undefined, crd.metadata.name, signal);
      const conds = (live?.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
      if (conds.some((c) => c.type === "Established" && c.status === "True")) break;
      if (Date.now() + delay > deadline) {
        throw new ManentError(Code.DeadlineExceeded, `cluster ${client.name}: ${describeRef(refOf(crd))}: not Established in time`);
      }
      await sleep(delay, undefined, { signal });
      delay = Math.min(Math.round(delay * 1.5), 1000);
    }
  }
}
