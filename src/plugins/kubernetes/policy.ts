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
  return podSpecAt(obj)?.spec;
}

/** The pod spec of a workload and its field path in the object (for messages naming the field). */
function podSpecAt(obj: KubeObject): { spec: PodSpecLike; path: string } | undefined {
  const spec = obj.spec as Record<string, unknown> | undefined;
  if (!spec) return undefined;
  if (obj.kind === "Pod") return { spec: spec as PodSpecLike, path: "spec" };
  if (obj.kind === "CronJob") {
    const job = spec.jobTemplate as { spec?: { template?: { spec?: PodSpecLike } } } | undefined;
    const pod = job?.spec?.template?.spec;
    return pod ? { spec: pod, path: "spec.jobTemplate.spec.template.spec" } : undefined;
  }
  const template = spec.template as { spec?: PodSpecLike } | undefined;
  return template?.spec && typeof template.spec === "object" && "containers" in template.spec
    ? { spec: template.spec, path: "spec.template.spec" }
    : undefined;
}

const pinned = /@sha256:[a-f0-9]{64}$/;

/** Every container, init container and ephemeral container image of the objects, with the field naming it. */
export function containerImages(objs: KubeObject[], file: string): { image: string; file: string; field: string }[] {
  const out: { image: string; file: string; field: string }[] = [];
  for (const obj of objs) {
    const pod = podSpecAt(obj);
    if (!pod) continue;
    for (const list of ["initContainers", "containers", "ephemeralContainers"] as const) {
      for (const [i, c] of (pod.spec[list] ?? []).entries()) {
        out.push({ image: c.image ?? "", file, field: `${describeRef(refOf(obj))}: ${pod.path}.${list}[${i}].image` });
      }
    }
  }
  return out;
}

/**
 * With `require_image_digest` (or a verification policy's `image_digests`), refuses every container
 * image not pinned by digest, naming the file, the object and the field of each.
 */
export function checkImageDigests(objs: KubeObject[], file: string): void {
  const bad: string[] = [];
  for (const obj of objs) {
    const pod = podSpecAt(obj);
    if (!pod) continue;
    for (const list of ["initContainers", "containers", "ephemeralContainers"] as const) {
      for (const [i, c] of (pod.spec[list] ?? []).entries()) {
        if (!c.image || !pinned.test(c.image))
          bad.push(`${file}: ${describeRef(refOf(obj))}: ${pod.path}.${list}[${i}].image ${JSON.stringify(c.image ?? "")}`);
      }
    }
  }
  if (bad.length > 0) {
    throw new ManentError(
      Code.InvalidArgument,
      `kubernetes: require_image_digest is set and these images are not pinned by @sha256: digest (name@sha256:<digest>): ${bad.join("; ")}`,
      { details: { file: bad[0]!.split(": ")[0]!, field: bad[0]!.split(": ")[2]!.split(" ")[0]! } },
    );
  }
}
