import { Code, ManentError } from "../../core/errors.js";
import type { Request } from "../../core/contract/index.js";
import type { ArtifactContent } from "./artifact.js";
import type { ClusterClient } from "./cluster-client.js";
import { isHelmHook, renderChart } from "./helm.js";
import { stamp, type ReleaseContext } from "./labels.js";
import { parseManifests } from "./manifests.js";
import { describeRef, refKey, refOf, sortForApply, type KubeObject } from "./objects.js";
import type { KubernetesParams } from "./params.js";
import { checkImageDigests, checkNamespaces } from "./policy.js";
import { substitute } from "./substitute.js";

/** The variables a manifest can use: manent's own plus the `var.*` params. */
export function manifestVars(req: Request, params: KubernetesParams): Record<string, string> {
  return {
    ...params.vars,
    MANENT_VERSION: req.artifact.version,
    MANENT_ENVIRONMENT: req.environment,
    MANENT_APPLICATION: req.application,
    MANENT_TENANT: req.tenant,
  };
}

/** Parses and checks plain manifests; needs no cluster (used by `validate` too). */
export function manifestObjects(
  content: Extract<ArtifactContent, { kind: "manifests" }>,
  vars: Record<string, string>,
  params: KubernetesParams,
): KubeObject[] {
  return content.files.flatMap((f) => {
    const objs = parseManifests(substitute(f.text, vars, f.name), f.name);
    checkPolicies(objs, params, f.name);
    return objs;
  });
}

function checkPolicies(objs: KubeObject[], params: KubernetesParams, file: string): void {
  checkNamespaces(objs, params.namespace);
  if (params.require_image_digest) checkImageDigests(objs, file);
}

export interface Rendered {
  /** Stamped objects in apply order. */
  objects: KubeObject[];
  /** Objects not applied: Helm hooks. */
  skipped: number;
  /** Custom resources whose CRD comes with this release (the cluster cannot check them before it is installed). */
  pendingCrdKinds: Set<string>;
}

/**
 * The objects one cluster gets: the manifests, or the chart rendered against that cluster's
 * version and API versions; checked, stamped with ownership and placed in the namespace.
 */
export async function renderForCluster(
  client: ClusterClient,
  content: ArtifactContent,
  req: Request,
  params: KubernetesParams,
  ctx: ReleaseContext,
  kubeVersion: string,
): Promise<Rendered> {
  let objs: KubeObject[];
  let skipped = 0;
  if (content.kind === "manifests") {
    objs = manifestObjects(content, manifestVars(req, params), params);
  } else {
    const text = await renderChart({
      chartPath: content.path,
      chartName: content.chartName,
      chartFiles: content.files,
      release: params.helm_release_name ?? (req.artifact.name.toLowerCase().replace(/[^a-z0-9-]+/g, "-") || content.chartName),
      namespace: params.namespace,
      kubeVersion,
      apiVersions: await client.helmApiVersions(),
      valuesFiles: params.helmValuesFiles,
      inlineValues: params.helm_values,
      set: params.helmSet,
      signal: req.signal,
    });
    const all = parseManifests(text, `chart ${content.chartName}`);
    objs = params.helm_include_hooks ? all : all.filter((o) => !isHelmHook(o));
    skipped = all.length - objs.length;
    checkPolicies(objs, params, `chart ${content.chartName}`);
  }

  // Kinds defined by CRDs of this very release: scope comes from the CRD, not from discovery.
  const crdScopes = new Map<string, boolean>();
  for (const o of objs) {
    if (o.kind !== "CustomResourceDefinition") continue;
    const spec = o.spec as { group?: string; names?: { kind?: string }; scope?: string } | undefined;
    if (spec?.group && spec.names?.kind) crdScopes.set(`${spec.group}|${spec.names.kind}`, spec.scope !== "Cluster");
  }
  const pendingCrdKinds = new Set<string>();
  const stamped: KubeObject[] = [];
  for (const o of objs) {
    const res = await client.resourceFor(o.apiVersion, o.kind);
    let namespaced = res?.namespaced;
    if (namespaced === undefined) {
      const group = o.apiVersion.includes("/") ? o.apiVersion.split("/")[0]! : "";
      namespaced = crdScopes.get(`${group}|${o.kind}`);
      if (namespaced === undefined) {
        throw new ManentError(
          Code.FailedPrecondition,
          `cluster ${client.name}: ${describeRef(refOf(o))}: the cluster does not serve kind ${o.kind} in ${o.apiVersion}`,
        );
      }
      pendingCrdKinds.add(`${o.apiVersion}|${o.kind}`);
    }
    stamped.push(stamp(o, ctx, namespaced));
  }
  const seen = new Set<string>();
  for (const o of stamped) {
    const key = refKey(refOf(o));
    if (seen.has(key)) throw new ManentError(Code.InvalidArgument, `kubernetes: ${describeRef(refOf(o))} appears twice in the artifact`);
    seen.add(key);
  }
  return { objects: sortForApply(stamped), skipped, pendingCrdKinds };
}
