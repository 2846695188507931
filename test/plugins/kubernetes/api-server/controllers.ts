import type { ResourceInfo } from "./catalogue.js";
import type { Change, ObjectStore } from "./store.js";

export interface ControllerOptions {
  /** Real milliseconds per step of a rollout (a pod becoming ready). */
  stepMs: number;
  /** Real milliseconds per simulated second of `progressDeadlineSeconds`. */
  msPerSecond: number;
  /** Images that never pull (the tutorial's `does-not-exist`): their rollouts stall. */
  failingImage: RegExp;
  /** Nodes a DaemonSet schedules on. */
  nodes: number;
}

type Obj = Record<string, unknown> & { metadata: Record<string, unknown> };
type Condition = { type: string; status: string; reason: string; message: string; lastUpdateTime: string; lastTransitionTime: string };

/** The pod-template-hash alphabet of the real controller (no vowels, no look-alike digits). */
const alphabet = "bcdfghjklmnpqrstvwxz2456789";

/** FNV-32a of the template rendered in the controller's alphabet, like `hello-8544968f49`. */
export function templateHash(template: unknown): string {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(JSON.stringify(template ?? {}))) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  let s = "";
  for (const ch of String(h)) s += alphabet[Number(ch) % alphabet.length];
  return s;
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function cond(type: string, status: string, reason: string, message: string): Condition {
  const t = now();
  return { type, status, reason, message, lastUpdateTime: t, lastTransitionTime: t };
}

function images(obj: Obj): string[] {
  const spec = (obj.spec as { template?: { spec?: { containers?: { image?: string }[]; initContainers?: { image?: string }[] } } }) ?? {};
  const pod = spec.template?.spec ?? {};
  return [...(pod.initContainers ?? []), ...(pod.containers ?? [])].map((c) => c.image ?? "");
}

/**
 * The controllers the tests need, driven by store changes: Deployment (progressing → available,
 * or → ProgressDeadlineExceeded when an image matches `failingImage`), StatefulSet, DaemonSet
 * (complete after one step), CRD (Established, and its kind added to discovery).
 */
export class Controllers {
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly store: ObjectStore,
    private readonly opts: ControllerOptions,
    private readonly crdEstablished: (crd: Obj) => void,
  ) {}

  onChange(c: Change): void {
    if (!c.generationChanged) return;
    if (c.res.kind === "Deployment") this.deployment(c.res, c.obj);
    else if (c.res.kind === "StatefulSet" || c.res.kind === "DaemonSet") this.later(() => this.simpleWorkload(c.res, c.obj), this.opts.stepMs);
    else if (c.res.kind === "CustomResourceDefinition") this.later(() => this.crd(c.res, c.obj), this.opts.stepMs);
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private later(fn: () => void, ms: number): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  /** The live object if it still has generation `gen` (a newer apply supersedes this rollout). */
  private current(res: ResourceInfo, obj: Obj): Obj | undefined {
    const live = this.store.get(res, obj.metadata.namespace as string | undefined, String(obj.metadata.name));
    return live && live.metadata.generation === obj.metadata.generation ? live : undefined;
  }

  private deployment(res: ResourceInfo, obj: Obj): void {
    const spec = obj.spec as { replicas?: number; progressDeadlineSeconds?: number; template?: unknown };
    const desired = spec.replicas ?? 1;
    const rs = `${String(obj.metadata.name)}-${templateHash(spec.template)}`;
    const failing = images(obj).some((i) => this.opts.failingImage.test(i));
    const ns = obj.metadata.namespace as string;
    const name = String(obj.metadata.name);
    const gen = obj.metadata.generation;

    this.later(() => {
      const live = this.current(res, obj);
      if (!live) return;
      const prev = (live.status ?? {}) as { availableReplicas?: number };
      const oldAvailable = Math.min(prev.availableReplicas ?? 0, desired);
      const updated = failing ? Math.min(1, desired) : desired;
      this.store.updateStatus(res, ns, name, {
        observedGeneration: gen,
        replicas: oldAvailable + updated,
        updatedReplicas: updated,
        readyReplicas: oldAvailable,
        availableReplicas: oldAvailable,
        unavailableReplicas: Math.max(0, desired - oldAvailable),
        conditions: [
          cond("Available", oldAvailable >= desired ? "True" : "False", oldAvailable >= desired ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable", oldAvailable >= desired ? "Deployment has minimum availability." : "Deployment does not have minimum availability."),
          cond("Progressing", "True", "ReplicaSetUpdated", `ReplicaSet "${rs}" is progressing.`),
        ],
      });
      if (failing) {
        this.later(() => {
          const still = this.current(res, obj);
          if (!still) return;
          const st = structuredClone(still.status) as { conditions: Condition[] };
          st.conditions = st.conditions.map((c) =>
            c.type === "Progressing" ? cond("Progressing", "False", "ProgressDeadlineExceeded", `ReplicaSet "${rs}" has timed out progressing.`) : c,
          );
          this.store.updateStatus(res, ns, name, st);
        }, (spec.progressDeadlineSeconds ?? 600) * this.opts.msPerSecond);
        return;
      }
      this.later(() => {
        if (!this.current(res, obj)) return;
        this.store.updateStatus(res, ns, name, {
          observedGeneration: gen,
          replicas: desired,
          updatedReplicas: desired,
          readyReplicas: desired,
          availableReplicas: desired,
          conditions: [
            cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
            cond("Progressing", "True", "NewReplicaSetAvailable", `ReplicaSet "${rs}" has successfully progressed.`),
          ],
        });
      }, this.opts.stepMs);
    }, this.opts.stepMs);
  }

  private simpleWorkload(res: ResourceInfo, obj: Obj): void {
    const live = this.current(res, obj);
    if (!live) return;
    const spec = obj.spec as { replicas?: number; template?: unknown };
    const ns = obj.metadata.namespace as string;
    const gen = obj.metadata.generation;
    if (res.kind === "StatefulSet") {
      const n = spec.replicas ?? 1;
      const rev = `${String(obj.metadata.name)}-${templateHash(spec.template)}`;
      this.store.updateStatus(res, ns, String(obj.metadata.name), {
        observedGeneration: gen,
        replicas: n,
        readyReplicas: n,
        currentReplicas: n,
        updatedReplicas: n,
        availableReplicas: n,
        currentRevision: rev,
        updateRevision: rev,
      });
    } else {
      const n = this.opts.nodes;
      this.store.updateStatus(res, ns, String(obj.metadata.name), {
        observedGeneration: gen,
        desiredNumberScheduled: n,
        currentNumberScheduled: n,
        updatedNumberScheduled: n,
        numberReady: n,
        numberAvailable: n,
        numberMisscheduled: 0,
      });
    }
  }

  private crd(res: ResourceInfo, obj: Obj): void {
    const live = this.current(res, obj);
    if (!live) return;
    const names = (obj.spec as { names?: unknown }).names;
    this.crdEstablished(live);
    this.store.updateStatus(res, undefined, String(obj.metadata.name), {
      acceptedNames: names,
      storedVersions: ((obj.spec as { versions?: { name: string; storage?: boolean }[] }).versions ?? []).filter((v) => v.storage).map((v) => v.name),
      conditions: [
        cond("NamesAccepted", "True", "NoConflicts", "no conflicts found for the names"),
        cond("Established", "True", "InitialNamesAccepted", "the initial names have been accepted"),
      ],
    });
  }
}
