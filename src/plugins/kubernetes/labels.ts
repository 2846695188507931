import type { KubeObject } from "./objects.js";

/** Who a release belongs to: stamped on every object and on the history. */
export interface ReleaseContext {
  tenant: string;
  application: string;
  environment: string;
  artifact: string;
  version: string;
  namespace: string;
}

/** The plugin's name, in results and errors (here so that every file of the plugin can name it without an import cycle). */
export const pluginName = "kubernetes";
export const managedBy = "manent";
export const fieldManager = "manent";

/**
 * A label value as Kubernetes accepts it: at most 63 characters of [A-Za-z0-9._-], starting and
 * ending with an alphanumeric. Anything else is replaced so that a tenant or artifact name never
 * makes the apply fail; the exact value is in the history anyway.
 */
export function labelValue(v: string): string {
  return v
    .replace(/[^A-Za-z0-9._-]/g, "-")
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+/, "")
    .replace(/[^A-Za-z0-9]+$/, "");
}

export function ownershipLabels(ctx: ReleaseContext): Record<string, string> {
  return {
    "app.kubernetes.io/managed-by": managedBy,
    "manent.io/application": labelValue(ctx.application),
    "manent.io/artifact": labelValue(ctx.artifact),
    "manent.io/tenant": labelValue(ctx.tenant || "untenanted"),
    "manent.io/environment": labelValue(ctx.environment),
  };
}

/**
 * The object as manent applies it: in the environment's namespace (when the kind is namespaced),
 * with ownership labels and the version annotation. The input is not modified.
 */
export function stamp(obj: KubeObject, ctx: ReleaseContext, namespaced: boolean): KubeObject {
  const copy = structuredClone(obj);
  if (namespaced) copy.metadata.namespace = ctx.namespace;
  else delete copy.metadata.namespace;
  copy.metadata.labels = { ...(copy.metadata.labels ?? {}), ...ownershipLabels(ctx) };
  copy.metadata.annotations = { ...(copy.metadata.annotations ?? {}), "manent.io/version": ctx.version };
  return copy;
}
