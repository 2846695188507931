import { Code, ManentError } from "../../core/errors.js";
import { describeRef, refOf, type KubeObject } from "./objects.js";

/**
 * The namespace boundary: every object goes to the environment's namespace. An object that names
 * another one is refused rather than moved, because its author meant something else.
 */
export function checkNamespaces(objs: KubeObject[], namespace: string): void {
  const strays = objs.filter((o) => o.metadata.namespace !== undefined && o.metadata.namespace !== namespace);
  if (strays.length > 0) {
    throw new ManentError(
      Code.InvalidArgument,
      `kubernetes: ${strays.map((o) => `${describeRef(refOf(o))}`).join(", ")}: names a namespace other than "${namespace}" (the environment's namespace param); remove metadata.namespace or deploy it from its own environment`,
      { details: { namespace } },
    );
  }
}

interface PodSpecLike {
  containers?: { name?: string; image?: string }[];
  initContainers?: { name?: string; image?: string }[];
  ephemeralContainers?: { name?: string; image?: string }[];
}

/** The pod spec inside any workload kind: Pod, the template kinds, CronJob's job template. */
export function podSpecOf(obj: KubeObject): PodSpecLike | undefined {
  const spec = obj.spec as Record<string, unknown> | undefined;
  if (!spec) return undefined;
  if (obj.kind === "Pod") return spec as PodSpecLike;
  if (obj.kind === "CronJob") {
    const job = spec.jobTemplate as { spec?: { template?: { spec?: PodSpecLike } } } | undefined;
    return job?.spec?.template?.spec;
  }
  const template = spec.template as { spec?: PodSpecLike } | undefined;
  return template?.spec && typeof template.spec === "object" && "containers" in template.spec ? template.spec : undefined;
}

const pinned = /@sha256:[a-f0-9]{64}$/;

/** With `require_image_digest`, refuses every container image not pinned by digest. */
export function checkImageDigests(objs: KubeObject[]): void {
  const bad: string[] = [];
  for (const obj of objs) {
    const pod = podSpecOf(obj);
    if (!pod) continue;
    for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? []), ...(pod.ephemeralContainers ?? [])]) {
      if (!c.image || !pinned.test(c.image))
        bad.push(`${describeRef(refOf(obj))} container ${c.name ?? "?"} image ${JSON.stringify(c.image ?? "")}`);
    }
  }
  if (bad.length > 0) {
    throw new ManentError(
      Code.InvalidArgument,
      `kubernetes: require_image_digest is set and these images are not pinned by @sha256: digest: ${bad.join("; ")}`,
    );
  }
}
