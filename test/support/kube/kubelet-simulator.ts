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

interface ContainerSpec {
  name: string;
  image: string;
}

interface PodLike extends KubeObj {
  metadata: KubeObj["metadata"] & { uid: string; deletionTimestamp?: string; ownerReferences?: { kind: string }[]; finalizers?: string[] };
  spec: {
    nodeName?: string;
    schedulerName?: string;
    restartPolicy?: string;
    containers: ContainerSpec[];
    initContainers?: ContainerSpec[];
  };
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}

const leaseSeconds = 40;

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
  /** Pod uid → the phase this simulator wrote, so its own status writes are not processed again. */
  private readonly written = new Map<string, string>();

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
    if (pod.spec.nodeName !== this.nodeName || this.written.has(uid)) return;
    const status = this.statusFor(pod);
    this.written.set(uid, status.phase);
    await this.ignoreGone(
      this.client.patch("v1", "Pod", namespace, name, { status }, { subresource: "status", manager: "kubelet-simulator" }),
    );
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

  /** The status a kubelet would report once it has tried to pull every image of the pod. */
  private statusFor(pod: PodLike): Record<string, unknown> & { phase: string } {
    const now = new Date().toISOString();
    const inits = pod.spec.initContainers ?? [];
    const blocked = [...inits, ...pod.spec.containers].filter((c) => !this.isPullable(c.image));
    const initsDone = inits.every((c) => this.isPullable(c.image));
    const runsToCompletion = pod.spec.restartPolicy === "Never" || pod.spec.restartPolicy === "OnFailure";
    const ok = blocked.length === 0;
    const phase = !ok
      ? "Pending"
      : runsToCompletion && (pod.metadata.ownerReferences ?? []).some((o) => o.kind === "Job")
        ? "Succeeded"
        : "Running";
    const ready = ok && phase === "Running";
    const unready = pod.spec.containers.filter((c) => !this.isPullable(c.image)).map((c) => c.name);
    const condition = (type: string, isTrue: boolean, reason?: string, message?: string) => ({
      type,
      status: isTrue ? "True" : "False",
      lastProbeTime: null,
      lastTransitionTime: now,
      ...(isTrue || !reason ? {} : { reason, message }),
    });
    const waiting = (c: ContainerSpec) => ({
      waiting: {
        reason: "ImagePullBackOff",
        message: `Back-off pulling image "${c.image}": ErrImagePull: failed to pull and unpack image "${c.image}": not found (kubelet simulator: image not declared pullable)`,
      },
    });
    const containerStatus = (c: ContainerSpec, init: boolean) => {
      const pulled = this.isPullable(c.image);
      const terminated = init || phase === "Succeeded";
      return {
        name: c.name,
        image: c.image,
        imageID: pulled ? `simulated://${c.image}` : "",
        ...(pulled ? { containerID: `simulated://${pod.metadata.uid}/${c.name}` } : {}),
        ready: pulled && !terminated,
        started: pulled && !terminated,
        restartCount: 0,
        state: !pulled
          ? waiting(c)
          : terminated
            ? { terminated: { exitCode: 0, reason: "Completed", startedAt: now, finishedAt: now } }
            : { running: { startedAt: now } },
      };
    };
    this.podIndex++;
    return {
      phase,
      conditions: [
        condition("PodReadyToStartContainers", true),
        condition(
          "Initialized",
          initsDone,
          "ContainersNotInitialized",
          "containers with incomplete status: [" +
            inits
              .filter((c) => !this.isPullable(c.image))
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
      podIP: `10.244.${Math.floor(this.podIndex / 250) % 250}.${(this.podIndex % 250) + 1}`,
      startTime: now,
      qosClass: "BestEffort",
      ...(inits.length > 0 ? { initContainerStatuses: inits.map((c) => containerStatus(c, true)) } : {}),
      containerStatuses: pod.spec.containers.map((c) => containerStatus(c, false)),
    };
  }
}

/** metav1.MicroTime: RFC 3339 with microseconds. */
function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
