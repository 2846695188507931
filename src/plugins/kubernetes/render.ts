import { Code, ManentError } from "../../core/errors.js";
import type { Request } from "../../core/contract/index.js";
import type { ArtifactContent } from "./artifact.js";
import type { ClusterClient } from "./cluster-client.js";
import { isHelmHook, renderChart } from "./helm.js";
import { stamp, type ReleaseContext } from "./labels.js";
import { parseManifests } from "./manifests.js";
import { describeRef, refKey, refOf, sortForApply, type KubeObject } from "./objects.js";
import type { KubernetesParams } from "./params.js";
import { checkImageDigests, checkNamespaces, containerImages } from "./policy.js";
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

/**
 * Under a verification policy with image_signatures, the objects applied run only images verified
 * before the deploy began: a chart rendered again (a retry, a deploy that waited for its window,
 * a cluster upgraded meanwhile) may name others, which no one checked.
 */
function checkVerifiedImages(files: RenderedFiles["files"], verified: string[], cluster: string): void {
  const allowed = new Set(verified);
  const unverified = files.flatMap((f) => containerImages(f.objects, f.name)).filter((i) => !allowed.has(i.image));
  if (unverified.length === 0) return;
  throw new ManentError(
    Code.PermissionDenied,
    `kubernetes: cluster ${cluster}: ${unverified
      .slice(0, 5)
      .map((i) => `image ${JSON.stringify(i.image.slice(0, 300))} (${i.file}: ${i.field})`)
      .join(
        ", ",
      )} was not among the images verified before the deploy began (${verified.length === 0 ? "none" : verified.slice(0, 5).join(", ")}): ` +
      "the artifact rendered for this cluster now runs an image whose signature was never checked; deploy again to verify it",
    { details: { plugin: "kubernetes", image: unverified[0]!.image.slice(0, 300), field: unverified[0]!.field } },
  );
}

export interface Rendered {
  /** Stamped objects in apply order. */
  objects: KubeObject[];
  /** Objects not applied: Helm hooks. */
  skipped: number;
  /** Custom resources whose CRD comes with this release (the cluster cannot check them before it is installed). */
  pendingCrdKinds: Set<string>;
}

/** Plain manifests' objects, each file's under its name: what every cluster gets (needs none to render). */
export function manifestFiles(
  content: Extract<ArtifactContent, { kind: "manifests" }>,
  req: Request,
  params: KubernetesParams,
): RenderedFiles["files"] {
  const vars = manifestVars(req, params);
  return content.files.map((f) => ({ name: f.name, objects: manifestObjects({ kind: "manifests", files: [f] }, vars, params) }));
}

/** An artifact's objects as rendered for one cluster, before they are stamped: each file's (a chart is one) under its name. */
export interface RenderedFiles {
  files: { name: string; objects: KubeObject[] }[];
  /** Objects not applied: Helm hooks. */
  skipped: number;
}

/**
 * The manifests, or the chart rendered against the cluster's version and API versions (hooks
 * left out unless asked for); checked against the plugin's policies.
 */
export async function renderFiles(
  client: ClusterClient,
  content: ArtifactContent,
  req: Request,
  params: KubernetesParams,
  kubeVersion: string,
): Promise<RenderedFiles> {
  if (content.kind === "manifests") return { files: manifestFiles(content, req, params), skipped: 0 };
  const name = `chart ${content.chartName}`;
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
  const all = parseManifests(text, name);
  const objects = params.helm_include_hooks ? all : all.filter((o) => !isHelmHook(o));
  checkPolicies(objects, params, name);
  return { files: [{ name, objects }], skipped: all.length - objects.length };
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
  const { files, skipped } = await renderFiles(client, content, req, params, kubeVersion);
  if (req.verifiedImages) checkVerifiedImages(files, req.verifiedImages, client.name);
  const objs = files.flatMap((f) => f.objects);

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
