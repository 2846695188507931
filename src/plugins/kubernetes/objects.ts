/** A Kubernetes object as plain JSON: what manifests parse to and what the API returns. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** What identifies an object across releases (stored in the history to prune and roll back). */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

export function refOf(obj: KubeObject): ObjectRef {
  const ref: ObjectRef = { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name };
  if (obj.metadata.namespace) ref.namespace = obj.metadata.namespace;
  return ref;
}

/** `Deployment/hello/hello`, `CustomResourceDefinition/widgets.example.com`: how errors name an object. */
export function describeRef(ref: ObjectRef): string {
  return ref.namespace ? `${ref.kind}/${ref.namespace}/${ref.name}` : `${ref.kind}/${ref.name}`;
}

/** Identity ignoring the version: `apps/v1` and `apps/v1beta1` Deployments are the same object. */
export function refKey(ref: ObjectRef): string {
  const group = ref.apiVersion.includes("/") ? ref.apiVersion.split("/")[0] : "";
  return `${group}|${ref.kind}|${ref.namespace ?? ""}|${ref.name}`;
}

/**
 * Apply order: what others reference first (CRDs, namespaces' contents like service accounts,
 * config), workloads after, so a Deployment never starts before its ConfigMap exists.
 */
const kindOrder = [
  "CustomResourceDefinition",
  "Namespace",
  "ResourceQuota",
  "LimitRange",
  "PodSecurityPolicy",
  "ServiceAccount",
  "Secret",
  "ConfigMap",
  "StorageClass",
  "PersistentVolume",
  "PersistentVolumeClaim",
  "ClusterRole",
  "ClusterRoleBinding",
  "Role",
  "RoleBinding",
  "Service",
  "DaemonSet",
  "Pod",
  "ReplicaSet",
  "Deployment",
  "StatefulSet",
  "Job",
  "CronJob",
  "Ingress",
  "HorizontalPodAutoscaler",
];

function rank(kind: string): number {
  const i = kindOrder.indexOf(kind);
  return i === -1 ? kindOrder.length : i;
}

/** A stable sort by {@link kindOrder}; objects of the same rank keep their manifest order. */
export function sortForApply<T extends { kind: string }>(objs: T[]): T[] {
  return objs
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o.kind) - rank(b.o.kind) || a.i - b.i)
    .map((x) => x.o);
}

/** Deletion is the reverse: workloads go before what they use. */
export function sortForDelete<T extends { kind: string }>(objs: T[]): T[] {
  return sortForApply(objs).reverse();
}
