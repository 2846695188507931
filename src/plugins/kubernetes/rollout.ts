import { setTimeout as sleep } from "node:timers/promises";
import { Code, ManentError, permanent } from "../../core/errors.js";
import { objectError } from "./apply.js";
import type { ClusterClient } from "./cluster-client.js";
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
  let delay = 50;
  for (;;) {
    const still: KubeObject[] = [];
    // A few GETs at a time: a release with many workloads must not flood the API server.
    for (let i = 0; i < pending.length; i += pollConcurrency) {
      const batch = pending.slice(i, i + pollConcurrency);
      const lives = await Promise.all(
        batch.map((o) =>
          client.get(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name, signal).catch((err: unknown) => {
            throw objectError(client, refOf(o), "get", err);
          }),
        ),
      );
      for (const [j, obj] of batch.entries()) {
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
    delay = Math.min(Math.round(delay * 1.5), 2000);
  }
}

const pollConcurrency = 8;

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
