import type { KubeClient, KubeObj, WatchEvent } from "./kube-client.js";
import { KubeRequestError } from "./kube-client.js";

export interface KubeletSimulatorOptions {
  /**
   * Images whose pull succeeds (exact reference, or a RegExp); every other image is "not found"
   * and its container waits in ImagePullBackOff. More can be added later with allowImages().
   */
  pullableImages?: (string | RegExp)[];
  /** The node's name (default `manent-test-node`). */
  nodeName?: string;
}

interface KeyRef {
  name: string;
  key: string;
  optional?: boolean;
}

interface ContainerSpec {
  name: string;
  image: string;
  env?: { name: string; valueFrom?: { secretKeyRef?: KeyRef; configMapKeyRef?: KeyRef } }[];
  envFrom?: { secretRef?: { name: string; optional?: boolean }; configMapRef?: { name: string; optional?: boolean } }[];
}

interface VolumeSpec {
  name: string;
  secret?: { secretName: string; optional?: boolean; items?: { key: string }[] };
  configMap?: { name: string; optional?: boolean; items?: { key: string }[] };
}

/** What keeps a pod from starting besides its images: the Secrets and ConfigMaps it references. */
interface MissingReferences {
  /** Volumes that cannot be mounted, as the kubelet's FailedMount says: no container is created. */
  volumes: string[];
  /** Container name → why its environment cannot be made (CreateContainerConfigError). */
  containers: Map<string, string>;
}

interface PodLike extends KubeObj {
  metadata: KubeObj["metadata"] & { uid: string; deletionTimestamp?: string; ownerReferences?: { kind: string }[]; finalizers?: string[] };
  spec: {
    nodeName?: string;
    schedulerName?: string;
    restartPolicy?: string;
    containers: ContainerSpec[];
    initContainers?: ContainerSpec[];
    volumes?: VolumeSpec[];
  };
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}

const leaseSeconds = 40;
/** How soon a pod waiting on a missing Secret or ConfigMap is looked at again (the kubelet retries too). */
const referenceRetryMs = 500;

/**
 * Plays the kubelet's part for a control plane with no kubelet and no container runtime, the way
 * KWOK does (see README.md): one Ready node kept alive by its Lease, pods bound to it, and pod
 * statuses written from a declared list of pullable images. Everything else (ReplicaSets,
 * Deployment conditions, availability, progress deadlines, garbage collection) is the real
 * controllers' work.
 */
export class KubeletSimulator {
  readonly nodeName: string;
  /** Failures of the simulator's own requests (a test can assert there are none). */
  readonly errors: unknown[] = [];
  private readonly pullable: (string | RegExp)[];
  private stopWatch: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private queue: Promise<void> = Promise.resolve();
  private stopped = false;
  private podIndex = 0;
  /**
   * Pod uid → the state this simulator wrote, so its own status writes are not processed again; a
   * pod waiting on a missing Secret or ConfigMap is kept as "blocked: <why>" and looked at again.
   */
  private readonly written = new Map<string, string>();
  /** Pod uid → its pending look-again (one per pod). */
  private readonly retries = new Map<string, NodeJS.Timeout>();

  private constructor(
    private readonly client: KubeClient,
    opts: KubeletSimulatorOptions,
  ) {
    this.nodeName = opts.nodeName ?? "manent-test-node";
    this.pullable = [...(opts.pullableImages ?? [])];
  }

  static async start(client: KubeClient, opts: KubeletSimulatorOptions = {}): Promise<KubeletSimulator> {
    const sim = new KubeletSimulator(client, opts);
    await sim.registerNode();
    sim.heartbeat = setInterval(() => void sim.renewLease().catch((e: unknown) => sim.fail(e)), 10_000);
    sim.heartbeat.unref();
    sim.stopWatch = client.watch(
      "/api/v1/pods",
      (e) => sim.enqueue(e),
      (err) => sim.fail(err),
    );
    return sim;
  }

  /** Makes more images pullable, for pods created from now on. */
  allowImages(...images: (string | RegExp)[]): void {
    this.pullable.push(...images);
  }

  isPullable(image: string): boolean {
    return this.pullable.some((p) => (typeof p === "string" ? p === image : p.test(image)));
  }

  stop(): void {
    this.stopped = true;
    this.stopWatch?.();
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const t of this.retries.values()) clearTimeout(t);
    this.retries.clear();
  }

  private fail(err: unknown): void {
    if (!this.stopped) this.errors.push(err);
  }

  private async registerNode(): Promise<void> {
    const now = new Date().toISOString();
    await this.client.apply(
      {
        apiVersion: "v1",
        kind: "Node",
        metadata: {
          name: this.nodeName,
          labels: {
            "kubernetes.io/hostname": this.nodeName,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "manent.io/simulated": "true",
          },
        },
      },
      { manager: "kubelet-simulator" },
    );
    const cond = (type: string, status: string, reason: string, message: string) => ({
      type,
      status,
      reason,
      message,
      lastHeartbeatTime: now,
      lastTransitionTime: now,
    });
    await this.client.patch(
      "v1",
      "Node",
      undefined,
      this.nodeName,
      {
        status: {
          capacity: { cpu: "32", memory: "256Gi", pods: "250", "ephemeral-storage": "1Ti" },
          allocatable: { cpu: "32", memory: "256Gi", pods: "250", "ephemeral-storage": "1Ti" },
          conditions: [
            cond("Ready", "True", "KubeletReady", "kubelet simulator is posting ready status"),
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "simulated"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "simulated"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "simulated"),
          ],
          addresses: [{ type: "Hostname", address: this.nodeName }],
          nodeInfo: {
            kubeletVersion: "v1.34.2",
            containerRuntimeVersion: "simulated://0",
            architecture: "amd64",
            operatingSystem: "linux",
            osImage: "simulated",
            kernelVersion: "",
            kubeProxyVersion: "",
            machineID: "",
            systemUUID: "",
            bootID: "",
          },
        },
      },
      { subresource: "status", manager: "kubelet-simulator" },
    );
    await this.renewLease();
  }

  /** The node heartbeat the node lifecycle controller reads: without it the node turns NotReady. */
  private async renewLease(): Promise<void> {
    await this.client.apply(
      {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: this.nodeName, namespace: "kube-node-lease" },
        spec: { holderIdentity: this.nodeName, leaseDurationSeconds: leaseSeconds, renewTime: microTime(new Date()) },
      },
      { manager: "kubelet-simulator" },
    );
  }

  private enqueue(e: WatchEvent): void {
    // One event at a time: a pod's events stay in order and the API server is not flooded.
    this.queue = this.queue.then(() => this.handle(e)).catch((err: unknown) => this.fail(err));
  }

  private async handle(e: WatchEvent): Promise<void> {
    if (this.stopped) return;
    const pod = e.object as PodLike;
    const { namespace, name, uid } = pod.metadata as { namespace: string; name: string; uid: string };
    if (e.type === "DELETED") {
      this.written.delete(uid);
      clearTimeout(this.retries.get(uid));
      this.retries.delete(uid);
      return;
    }
    if (pod.metadata.deletionTimestamp) {
      // The kubelet confirms a graceful deletion once the containers have stopped: at once here.
      if (!pod.spec.nodeName || pod.spec.nodeName === this.nodeName) {
        if ((pod.metadata.finalizers ?? []).length === 0)
          await this.ignoreGone(this.client.delete("v1", "Pod", namespace, name, { gracePeriodSeconds: 0, uid }));
      }
      return;
    }
    if (!pod.spec.nodeName) {
      // No kube-scheduler runs: bind every pending pod to the one node, through the binding subresource.
      if ((pod.spec.schedulerName ?? "default-scheduler") !== "default-scheduler") return;
      await this.ignoreGone(
        this.client.request("POST", `/api/v1/namespaces/${namespace}/pods/${name}/binding`, {
          body: {
            apiVersion: "v1",
            kind: "Binding",
            metadata: { name, namespace, uid },
            target: { apiVersion: "v1", kind: "Node", name: this.nodeName },
          },
        }),
      );
      return;
    }
    const before = this.written.get(uid);
    if (pod.spec.nodeName !== this.nodeName || (before !== undefined && !before.startsWith("blocked"))) return;
    const missing = await this.missingReferences(pod, namespace);
    const blocked = missing.volumes.length + missing.containers.size > 0;
    const state = blocked ? `blocked: ${[...missing.volumes, ...missing.containers.values()].join("; ")}` : "started";
    if (blocked) this.retryLater(namespace, name, uid);
    if (state === before) return;
    const status = this.statusFor(pod, missing);
    this.written.set(uid, state);
    try {
      await this.ignoreGone(
        this.client.patch("v1", "Pod", namespace, name, { status }, { subresource: "status", manager: "kubelet-simulator" }),
      );
    } catch (err) {
      // Tried again at the pod's next event, as the kubelet's sync loop would; the failure stays in errors.
      this.written.delete(uid);
      throw err;
    }
  }

  /** A pod waiting on a Secret or ConfigMap is looked at again until they are there, or it is gone. */
  private retryLater(namespace: string, name: string, uid: string): void {
    if (this.retries.has(uid)) return;
    const t = setTimeout(() => {
      this.retries.delete(uid);
      if (this.stopped || !this.written.has(uid)) return;
      this.queue = this.queue
        .then(async () => {
          const pod = await this.client.get("v1", "Pod", namespace, name);
          if (pod && (pod.metadata as { uid?: string }).uid === uid) await this.handle({ type: "MODIFIED", object: pod });
        })
        .catch((err: unknown) => this.fail(err));
    }, referenceRetryMs);
    t.unref();
    this.retries.set(uid, t);
  }

  /**
   * The Secrets and ConfigMaps (and their keys) the pod needs that are not there, with the kubelet's
   * own wording: volumes first (nothing starts without them), then each container's environment.
   * References marked optional are never missing.
   */
  private async missingReferences(pod: PodLike, namespace: string): Promise<MissingReferences> {
    const cache = new Map<string, Promise<{ data?: Record<string, string> } | undefined>>();
    const read = (kind: "Secret" | "ConfigMap", name: string) => {
      const id = `${kind}/${name}`;
      let p = cache.get(id);
      if (!p) {
        p = this.client.get("v1", kind, namespace, name).then((o) => {
          const obj = o as { data?: Record<string, string>; binaryData?: Record<string, string> } | undefined;
          return obj && { data: { ...obj.data, ...obj.binaryData } };
        });
        cache.set(id, p);
      }
      return p;
    };
    const lower = (kind: "Secret" | "ConfigMap") => (kind === "Secret" ? "secret" : "configmap");
    const missing: MissingReferences = { volumes: [], containers: new Map() };
    for (const v of pod.spec.volumes ?? []) {
      const ref = v.secret
        ? { kind: "Secret" as const, name: v.secret.secretName, optional: v.secret.optional, items: v.secret.items }
        : v.configMap
          ? { kind: "ConfigMap" as const, name: v.configMap.name, optional: v.configMap.optional, items: v.configMap.items }
          : undefined;
      if (!ref || ref.optional) continue;
      const obj = await read(ref.kind, ref.name);
      const why = !obj
        ? `${lower(ref.kind)} "${ref.name}" not found`
        : (ref.items ?? [])
            .filter((i) => !(i.key in (obj.data ?? {})))
            .map((i) => `configured to use key ${i.key}, which is not present`)[0];
      if (why) missing.volumes.push(`MountVolume.SetUp failed for volume "${v.name}" : ${why}`);
    }
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      const reasons: string[] = [];
      for (const e of c.envFrom ?? []) {
        const ref = e.secretRef
          ? { kind: "Secret" as const, ...e.secretRef }
          : e.configMapRef
            ? { kind: "ConfigMap" as const, ...e.configMapRef }
            : undefined;
        if (ref && !ref.optional && !(await read(ref.kind, ref.name))) reasons.push(`${lower(ref.kind)} "${ref.name}" not found`);
      }
      for (const e of c.env ?? []) {
        const from = e.valueFrom;
        const ref = from?.secretKeyRef
          ? { kind: "Secret" as const, ...from.secretKeyRef }
          : from?.configMapKeyRef
            ? { kind: "ConfigMap" as const, ...from.configMapKeyRef }
            : undefined;
        if (!ref || ref.optional) continue;
        const obj = await read(ref.kind, ref.name);
        if (!obj) reasons.push(`${lower(ref.kind)} "${ref.name}" not found`);
        else if (!(ref.key in (obj.data ?? {}))) reasons.push(`couldn't find key ${ref.key} in ${ref.kind} ${namespace}/${ref.name}`);
      }
      if (reasons.length > 0) missing.containers.set(c.name, reasons[0]!);
    }
    return missing;
  }

  /** A request on a pod that is already gone (or was replaced) is not an error. */
  private async ignoreGone(p: Promise<unknown>): Promise<void> {
    try {
      await p;
    } catch (err) {
      if (err instanceof KubeRequestError && (err.status === 404 || err.status === 409)) return;
      throw err;
    }
  }

  /**
   * The status a kubelet would report once it has mounted the pod's volumes, tried to pull every
   * image and made each container's environment. qosClass is left alone: the API server sets it at
   * creation and it is immutable.
   */
  private statusFor(pod: PodLike, missing: MissingReferences): Record<string, unknown> & { phase: string } {
    const now = new Date().toISOString();
    const inits = pod.spec.initContainers ?? [];
    const mounted = missing.volumes.length === 0;
    // Why a container is not running, or undefined when it runs (or ran, for an init container).
    const waitingFor = (c: ContainerSpec): { reason: string; message?: string } | undefined =>
      !mounted
        ? { reason: "ContainerCreating" }
        : !this.isPullable(c.image)
          ? {
              reason: "ImagePullBackOff",
              message: `Back-off pulling image "${c.image}": ErrImagePull: failed to pull and unpack image "${c.image}": not found (kubelet simulator: image not declared pullable)`,
            }
          : missing.containers.has(c.name)
            ? { reason: "CreateContainerConfigError", message: missing.containers.get(c.name) }
            : undefined;
    // Init containers run one after the other: one that cannot start keeps the main containers from being tried.
    const initsDone = inits.every((c) => !waitingFor(c));
    const waiting = (c: ContainerSpec) => (initsDone ? waitingFor(c) : { reason: "PodInitializing" });
    const ok = initsDone && pod.spec.containers.every((c) => !waiting(c));
    const runsToCompletion = pod.spec.restartPolicy === "Never" || pod.spec.restartPolicy === "OnFailure";
    const phase = !ok
      ? "Pending"
      : runsToCompletion && (pod.metadata.ownerReferences ?? []).some((o) => o.kind === "Job")
        ? "Succeeded"
        : "Running";
    const ready = ok && phase === "Running";
    const unready = pod.spec.containers.filter((c) => waiting(c)).map((c) => c.name);
    const condition = (type: string, isTrue: boolean, reason?: string, message?: string) => ({
      type,
      status: isTrue ? "True" : "False",
      lastProbeTime: null,
      lastTransitionTime: now,
      ...(isTrue || !reason ? {} : { reason, message }),
    });
    const containerStatus = (c: ContainerSpec, init: boolean) => {
      const w = init ? waitingFor(c) : waiting(c);
      const pulled = mounted && this.isPullable(c.image);
      const terminated = !w && (init || phase === "Succeeded");
      return {
        name: c.name,
        image: c.image,
        imageID: pulled ? `simulated://${c.image}` : "",
        ...(!w ? { containerID: `simulated://${pod.metadata.uid}/${c.name}` } : {}),
        ready: !w && !terminated,
        started: !w && !terminated,
        restartCount: 0,
        state: w
          ? { waiting: w }
          : terminated
            ? { terminated: { exitCode: 0, reason: "Completed", startedAt: now, finishedAt: now } }
            : { running: { startedAt: now } },
      };
    };
    this.podIndex++;
    return {
      phase,
      conditions: [
        // No sandbox (and so no pod network) before the volumes are mounted.
        condition("PodReadyToStartContainers", mounted),
        condition(
          "Initialized",
          initsDone,
          "ContainersNotInitialized",
          "containers with incomplete status: [" +
            inits
              .filter((c) => waitingFor(c))
              .map((c) => c.name)
              .join(" ") +
            "]",
        ),
        condition("Ready", ready, "ContainersNotReady", `containers with unready status: [${unready.join(" ")}]`),
        condition("ContainersReady", ready, "ContainersNotReady", `containers with unready status: [${unready.join(" ")}]`),
        condition("PodScheduled", true),
      ],
      // Addresses are only recorded: nothing here sends traffic to a pod.
      hostIP: "127.0.0.1",
      hostIPs: [{ ip: "127.0.0.1" }],
      ...(mounted ? { podIP: `10.244.${Math.floor(this.podIndex / 250) % 250}.${(this.podIndex % 250) + 1}` } : {}),
      startTime: now,
      ...(inits.length > 0 ? { initContainerStatuses: inits.map((c) => containerStatus(c, true)) } : {}),
      containerStatuses: pod.spec.containers.map((c) => containerStatus(c, false)),
    };
  }
}

/** metav1.MicroTime: RFC 3339 with microseconds. */
function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
