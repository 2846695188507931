import { createHash } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { Code, ManentError } from "../../core/errors.js";
import { objectError } from "./apply.js";
import type { ClusterClient } from "./cluster-client.js";
import { fieldManager, labelValue, ownershipLabels, type ReleaseContext } from "./labels.js";
import { refOf, type KubeObject, type ObjectRef } from "./objects.js";

/** One release in the history, as the index lists it. */
export interface ReleaseEntry {
  /** The ConfigMap holding the release's objects. */
  configmap: string;
  version: string;
  artifact: string;
  applied_at: string;
  /** How many extra ConfigMaps (`<configmap>-part-<n>`) hold the compressed objects; 0 when none. */
  parts: number;
}

/** The index ConfigMap `manent-<app>-<env>`: which release is in service, the ones before. */
export interface HistoryIndex {
  current?: ReleaseEntry;
  previous?: ReleaseEntry;
  /** Newest first. */
  releases: ReleaseEntry[];
  /** A release being deployed (written before its objects are applied, cleared on success or rollback). */
  pending?: ReleaseEntry;
}

export interface StoredRelease {
  entry: ReleaseEntry;
  refs: ObjectRef[];
  objects: KubeObject[];
}

/** Objects JSON above this size is gzipped into binaryData. */
const inlineLimit = 256 * 1024;
/**
 * Base64 bytes per ConfigMap. The API server refuses a ConfigMap whose data exceeds 1 MiB
 * (1,048,576 bytes); this leaves room for the other keys and metadata.
 */
export const chunkLimit = 900 * 1024;

export function indexName(ctx: Pick<ReleaseContext, "application" | "environment">): string {
  return dnsName(`manent-${ctx.application}-${ctx.environment}`, 200);
}

/** `1.0.0` → `1-0-0`: a version as a piece of a DNS name. */
export function versionSlug(version: string): string {
  return (
    version
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40) || "v"
  );
}

function dnsName(s: string, max: number): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, max)
    .replace(/^-+|-+$/g, "");
}

/** `manent-hello-test-1-0-0-8bf0f7f2`: the hash tells apart two builds of the same version. */
export function releaseName(ctx: ReleaseContext, objects: KubeObject[]): string {
  const hash = createHash("sha256").update(JSON.stringify(objects)).digest("hex").slice(0, 8);
  return `${indexName(ctx)}-${versionSlug(ctx.version)}-${hash}`;
}

function configMap(
  name: string,
  ctx: ReleaseContext,
  role: string,
  content: { data?: Record<string, string>; binaryData?: Record<string, string> },
): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: ctx.namespace, labels: { ...ownershipLabels(ctx), "manent.io/history": role } },
    ...content,
  };
}

async function applyOwn(client: ClusterClient, obj: KubeObject, dryRun: boolean, signal?: AbortSignal): Promise<void> {
  // History ConfigMaps are manent's own; force so that a hand edit never blocks a deploy.
  try {
    await client.apply(obj, { manager: fieldManager, force: true, dryRun, signal });
  } catch (err) {
    throw objectError(client, refOf(obj), "patch", err);
  }
}

/** GET of a history ConfigMap, with errors naming it. */
async function getConfigMap(client: ClusterClient, ns: string, name: string, signal?: AbortSignal): Promise<KubeObject | undefined> {
  try {
    return await client.get("v1", "ConfigMap", ns, name, signal);
  } catch (err) {
    throw objectError(client, { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name }, "get", err);
  }
}

function parseEntry(text: string | undefined, cm: string, key: string): ReleaseEntry | undefined {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as ReleaseEntry;
  } catch {
    throw new ManentError(Code.DataLoss, `kubernetes: history ConfigMap ${cm}: key ${key} is not valid JSON`);
  }
}

export async function readIndex(client: ClusterClient, ctx: ReleaseContext, signal?: AbortSignal): Promise<HistoryIndex> {
  const name = indexName(ctx);
  const cm = await getConfigMap(client, ctx.namespace, name, signal);
  const data = (cm?.data ?? {}) as Record<string, string>;
  let releases: ReleaseEntry[] = [];
  if (data.releases) {
    try {
      releases = JSON.parse(data.releases) as ReleaseEntry[];
    } catch {
      throw new ManentError(Code.DataLoss, `kubernetes: history ConfigMap ${name}: key releases is not valid JSON`);
    }
  }
  const byName = (n: string | undefined) => (n ? releases.find((r) => r.configmap === n) : undefined);
  const index: HistoryIndex = { releases };
  const current = byName(data.current);
  const previous = byName(data.previous);
  const pending = parseEntry(data.pending, name, "pending");
  if (current) index.current = current;
  if (previous) index.previous = previous;
  if (pending) index.pending = pending;
  return index;
}

/** Writes the index. Keys: `current`, `previous`, `releases` (and `pending` while a deploy runs). */
export async function writeIndex(
  client: ClusterClient,
  ctx: ReleaseContext,
  index: HistoryIndex,
  opts: { dryRun?: boolean; signal?: AbortSignal } = {},
): Promise<void> {
  const data: Record<string, string> = {
    current: index.current?.configmap ?? "",
    previous: index.previous?.configmap ?? "",
    releases: JSON.stringify(index.releases),
  };
  if (index.pending) data.pending = JSON.stringify(index.pending);
  // Server-side apply drops the keys the manifest no longer sets, so `pending` disappears.
  await applyOwn(client, configMap(indexName(ctx), ctx, "index", { data }), opts.dryRun ?? false, opts.signal);
}

/**
 * Saves the objects of a release. Small releases are plain JSON; larger ones gzip+base64 in
 * binaryData; when even that exceeds one ConfigMap, the chunks go to `<name>-part-<n>` ConfigMaps
 * and the release ConfigMap records how many.
 */
export async function writeRelease(
  client: ClusterClient,
  ctx: ReleaseContext,
  name: string,
  objects: KubeObject[],
  refs: ObjectRef[],
  signal?: AbortSignal,
): Promise<ReleaseEntry> {
  const json = JSON.stringify(objects);
  const entry: ReleaseEntry = {
    configmap: name,
    version: ctx.version,
    artifact: ctx.artifact,
    applied_at: new Date().toISOString(),
    parts: 0,
  };
  const data: Record<string, string> = {
    version: ctx.version,
    artifact: ctx.artifact,
    applied_at: entry.applied_at,
    refs: JSON.stringify(refs),
  };
  const binaryData: Record<string, string> = {};
  if (Buffer.byteLength(json) <= inlineLimit) {
    data.objects = json;
  } else {
    const b64 = gzipSync(json).toString("base64");
    if (b64.length + Buffer.byteLength(data.refs!) <= chunkLimit) {
      binaryData["objects.json.gz"] = b64;
    } else {
      const chunks: string[] = [];
      // Base64 cut on multiples of 4 characters decodes chunk by chunk.
      for (let i = 0; i < b64.length; i += chunkLimit) chunks.push(b64.slice(i, i + chunkLimit));
      entry.parts = chunks.length;
      data.parts = String(chunks.length);
      for (const [i, chunk] of chunks.entries()) {
        await applyOwn(client, configMap(`${name}-part-${i + 1}`, ctx, "part", { binaryData: { chunk } }), false, signal);
      }
    }
  }
  await applyOwn(client, configMap(name, ctx, "release", { data, binaryData }), false, signal);
  return entry;
}

export async function readRelease(
  client: ClusterClient,
  ctx: ReleaseContext,
  entry: ReleaseEntry,
  signal?: AbortSignal,
): Promise<StoredRelease> {
  const cm = await getConfigMap(client, ctx.namespace, entry.configmap, signal);
  if (!cm) {
    throw new ManentError(
      Code.FailedPrecondition,
      `kubernetes: cluster ${client.name}: release ConfigMap ${ctx.namespace}/${entry.configmap} (version ${entry.version}) is gone from the history`,
    );
  }
  const data = (cm.data ?? {}) as Record<string, string>;
  const binary = (cm.binaryData ?? {}) as Record<string, string>;
  let json: string;
  if (data.objects !== undefined) json = data.objects;
  else if (binary["objects.json.gz"] !== undefined) json = gunzipSync(Buffer.from(binary["objects.json.gz"], "base64")).toString("utf8");
  else {
    const parts = Number(data.parts ?? "0");
    const chunks: string[] = [];
    for (let i = 1; i <= parts; i++) {
      const part = await getConfigMap(client, ctx.namespace, `${entry.configmap}-part-${i}`, signal);
      const chunk = (part?.binaryData as Record<string, string> | undefined)?.chunk;
      if (chunk === undefined) {
        throw new ManentError(
          Code.DataLoss,
          `kubernetes: cluster ${client.name}: history ConfigMap ${ctx.namespace}/${entry.configmap}-part-${i} is missing`,
        );
      }
      chunks.push(chunk);
    }
    json = gunzipSync(Buffer.from(chunks.join(""), "base64")).toString("utf8");
  }
  return { entry, refs: JSON.parse(data.refs ?? "[]") as ObjectRef[], objects: JSON.parse(json) as KubeObject[] };
}

/** Just the refs of a release (what pruning needs), without decompressing its objects. */
export async function readRefs(
  client: ClusterClient,
  ctx: ReleaseContext,
  entry: ReleaseEntry,
  signal?: AbortSignal,
): Promise<ObjectRef[]> {
  const cm = await getConfigMap(client, ctx.namespace, entry.configmap, signal);
  const refs = (cm?.data as Record<string, string> | undefined)?.refs;
  return refs ? (JSON.parse(refs) as ObjectRef[]) : [];
}

export async function deleteRelease(client: ClusterClient, ctx: ReleaseContext, entry: ReleaseEntry, signal?: AbortSignal): Promise<void> {
  const names = [...Array.from({ length: entry.parts }, (_, i) => `${entry.configmap}-part-${i + 1}`), entry.configmap];
  for (const name of names) {
    try {
      await client.delete("v1", "ConfigMap", ctx.namespace, name, signal);
    } catch (err) {
      throw objectError(client, { apiVersion: "v1", kind: "ConfigMap", namespace: ctx.namespace, name }, "delete", err);
    }
  }
}

/**
 * Deletes the release and part ConfigMaps of this application and environment that no entry of
 * `kept` names: a failed release's, or one a stale index forgot. Needs `list` on ConfigMaps (the
 * tutorial's Role has it); without it the sweep is skipped and the reason returned.
 */
export async function deleteOrphanReleases(
  client: ClusterClient,
  ctx: ReleaseContext,
  kept: ReleaseEntry[],
  signal?: AbortSignal,
): Promise<{ deleted: number; error?: string }> {
  const names = new Set(kept.flatMap((e) => [e.configmap, ...Array.from({ length: e.parts }, (_, i) => `${e.configmap}-part-${i + 1}`)]));
  const selector = `manent.io/history in (release,part),manent.io/application=${labelValue(ctx.application)},manent.io/environment=${labelValue(ctx.environment)}`;
  let found: KubeObject[];
  try {
    found = await client.list("v1", "ConfigMap", ctx.namespace, selector, signal);
  } catch (err) {
    return { deleted: 0, error: ManentError.from(err).message };
  }
  let deleted = 0;
  for (const cm of found) {
    const name = cm.metadata.name;
    // Only names of this index's releases: another index with a longer name shares the labels' values.
    if (names.has(name) || !name.startsWith(`${indexName(ctx)}-`)) continue;
    try {
      if (await client.delete("v1", "ConfigMap", ctx.namespace, name, signal)) deleted++;
    } catch (err) {
      throw objectError(client, { apiVersion: "v1", kind: "ConfigMap", namespace: ctx.namespace, name }, "delete", err);
    }
  }
  return { deleted };
}
