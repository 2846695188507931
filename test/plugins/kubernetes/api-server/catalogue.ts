/** A resource the test server serves, as discovery describes it. */
export interface ResourceInfo {
  group: string;
  version: string;
  /** Plural, lowercase: the URL segment (`deployments`). */
  name: string;
  singularName: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
}

const rw = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

function r(group: string, version: string, name: string, kind: string, namespaced = true, verbs = rw): ResourceInfo {
  return { group, version, name, singularName: kind.toLowerCase(), kind, namespaced, verbs };
}

/** The built-in kinds: what the plugin's tests and the tutorial's manifests use. */
export function builtinResources(): ResourceInfo[] {
  return [
    r("", "v1", "namespaces", "Namespace", false),
    r("", "v1", "configmaps", "ConfigMap"),
    r("", "v1", "secrets", "Secret"),
    r("", "v1", "services", "Service"),
    r("", "v1", "serviceaccounts", "ServiceAccount"),
    r("", "v1", "pods", "Pod"),
    r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    r("apps", "v1", "deployments", "Deployment"),
    r("apps", "v1", "statefulsets", "StatefulSet"),
    r("apps", "v1", "daemonsets", "DaemonSet"),
    r("apps", "v1", "replicasets", "ReplicaSet"),
    r("batch", "v1", "jobs", "Job"),
    r("batch", "v1", "cronjobs", "CronJob"),
    r("networking.k8s.io", "v1", "ingresses", "Ingress"),
    r("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    r("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false),
  ];
}

/** Kinds whose changes bump `metadata.generation` (spec-bearing kinds; ConfigMaps have none). */
export const generationKinds = new Set([
  "Deployment",
  "StatefulSet",
  "DaemonSet",
  "ReplicaSet",
  "Job",
  "CronJob",
  "Ingress",
  "HorizontalPodAutoscaler",
  "CustomResourceDefinition",
  "Service",
  "Pod",
  "PersistentVolumeClaim",
]);

/** `deployments.apps`, `configmaps`: how Status messages name a resource. */
export function qualifiedName(res: Pick<ResourceInfo, "group" | "name">): string {
  return res.group ? `${res.name}.${res.group}` : res.name;
}
