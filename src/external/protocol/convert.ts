import {
  DriftStatus,
  TargetStatus,
  type Artifact,
  type TargetDrift,
  type Request,
  type Result,
  type Target,
  type TargetRelease,
  type TargetResult,
} from "../../core/contract/types.js";
import type * as pb from "../gen/deployer.js";

/** Conversions between the contract's types and the wire messages, used by host and SDK alike. */

export function artifactToProto(a: Artifact): pb.Artifact {
  return { type: a.type, name: a.name, version: a.version, source: a.source, sha256: a.sha256 ?? "", path: a.path ?? "" };
}

export function artifactFromProto(a: pb.Artifact | undefined): Artifact {
  const out: Artifact = { type: a?.type ?? "", name: a?.name ?? "", version: a?.version ?? "", source: a?.source ?? "" };
  if (a?.sha256) out.sha256 = a.sha256;
  if (a?.path) out.path = a.path;
  return out;
}

function targetToProto(t: Target): pb.Target {
  return { host: t.host, port: t.port ?? 0, labels: { ...t.labels }, name: t.name ?? "" };
}

function targetFromProto(t: pb.Target): Target {
  const out: Target = { host: t.host, labels: { ...t.labels } };
  if (t.port) out.port = t.port;
  if (t.name) out.name = t.name;
  return out;
}

/** The request fields that cross the wire (secrets, logger and signal stay on each side). */
export type WireRequest = Omit<Request, "secrets" | "logger" | "signal">;

export function requestToProto(r: WireRequest, secretsBrokerId: number, secretsCallToken = ""): pb.DeployRequest {
  return {
    deploymentId: r.deploymentId,
    tenant: r.tenant,
    application: r.application,
    environment: r.environment,
    artifact: artifactToProto(r.artifact),
    targets: r.targets.map(targetToProto),
    params: { ...r.params },
    secretsBrokerId,
    parallelism: r.parallelism,
    traffic: { ...(r.traffic ?? {}) },
    rollout: r.rollout ? { weights: r.rollout.weights, testers: r.rollout.testers } : undefined,
    secretsCallToken,
  };
}

export function requestFromProto(r: pb.DeployRequest | undefined): WireRequest {
  const out: WireRequest = {
    deploymentId: r?.deploymentId ?? "",
    tenant: r?.tenant ?? "",
    application: r?.application ?? "",
    environment: r?.environment ?? "",
    artifact: artifactFromProto(r?.artifact),
    targets: (r?.targets ?? []).map(targetFromProto),
    params: { ...(r?.params ?? {}) },
    // 0 comes from hosts that predate parallel targets: it means one at a time.
    parallelism: r?.parallelism || 1,
  };
  if (r && Object.keys(r.traffic).length > 0) out.traffic = { ...r.traffic };
  if (r?.rollout) out.rollout = { weights: r.rollout.weights, testers: r.rollout.testers };
  return out;
}

const statuses = new Set<string>(Object.values(TargetStatus));

function targetResultToProto(t: TargetResult): pb.TargetResult {
  return { host: t.host, status: t.status, details: { ...(t.details ?? {}) }, durationMs: t.duration_ms ?? 0, error: t.error ?? "" };
}

function targetResultFromProto(t: pb.TargetResult): TargetResult {
  const out: TargetResult = { host: t.host, status: statuses.has(t.status) ? (t.status as TargetStatus) : TargetStatus.Failed };
  if (Object.keys(t.details).length > 0) out.details = { ...t.details };
  if (t.durationMs) out.duration_ms = t.durationMs;
  if (t.error) out.error = t.error;
  return out;
}

export function resultToProto(r: Result): pb.DeployResponse {
  return { plugin: r.plugin, targets: r.targets.map(targetResultToProto), details: { ...(r.details ?? {}) } };
}

export function resultFromProto(r: pb.DeployResponse): Result {
  const out: Result = { plugin: r.plugin, targets: r.targets.map(targetResultFromProto) };
  if (Object.keys(r.details).length > 0) out.details = { ...r.details };
  return out;
}

export function releaseToProto(r: TargetRelease): pb.TargetRelease {
  return { host: r.host, version: r.version, details: { ...(r.details ?? {}) } };
}

export function releaseFromProto(r: pb.TargetRelease): TargetRelease {
  const out: TargetRelease = { host: r.host, version: r.version };
  if (Object.keys(r.details).length > 0) out.details = { ...r.details };
  return out;
}

export function driftToProto(d: TargetDrift): pb.TargetDrift {
  return {
    host: d.host,
    status: d.status,
    version: d.version,
    changes: d.changes.map((c) => ({ ...c })),
    details: { ...(d.details ?? {}) },
  };
}

const driftStatuses = new Set<string>(Object.values(DriftStatus));

/** A status this host does not know (a newer plugin's) is shown as unknown, with what the plugin said. */
export function driftFromProto(d: pb.TargetDrift): TargetDrift {
  const known = driftStatuses.has(d.status);
  const details = { ...d.details, ...(known ? {} : { reason: `the plugin answered status "${d.status}"` }) };
  const out: TargetDrift = {
    host: d.host,
    status: known ? (d.status as DriftStatus) : DriftStatus.Unknown,
    version: d.version,
    changes: d.changes.map((c) => ({ object: c.object, field: c.field, expected: c.expected, live: c.live })),
  };
  if (Object.keys(details).length > 0) out.details = details;
  return out;
}
