import { Code, ManentError } from "../errors.js";
import type { DeployRecord, DeployStatus } from "./deploy-store.js";
import { recordedSettings, type ResolvedDeploy, type Submission } from "./resolve.js";

/** The statuses a deploy is retried from: it ended without its release in place. */
export const retryableStatuses: ReadonlySet<DeployStatus> = new Set(["failed", "rolled_back", "cancelled"]);

/**
 * The submission of a retry (`manent retry ID`): a new deploy of the same artifact, pinned by the
 * sha256 of the bytes the retried deploy fetched, with the same descriptor and overrides and the
 * settings it resolved from its envconfig then (not today's file). A deploy that ended before
 * resolving has no recorded settings: its retry reads today's envconfig, as `kubectl argo rollouts
 * retry` runs the Rollout's current spec. Refused (412 failed_precondition, as a cancel of an ended
 * deploy is) for a deploy that is not retryable, and for a deploy a release ran (its release is retried).
 */
export function retrySubmission(d: DeployRecord): Submission {
  if (d.kind !== "deploy") {
    const what = d.kind === "dry_run" ? "a dry run changes nothing: submit it again" : "run manent rollback again";
    throw new ManentError(
      Code.FailedPrecondition,
      `deploy ${d.id} is a ${d.kind.replace("_", "-")}, not a deploy: only deploys are retried (${what})`,
      {
        details: { deploy: d.id, kind: d.kind },
      },
    );
  }
  if (!retryableStatuses.has(d.status)) {
    throw new ManentError(
      Code.FailedPrecondition,
      `deploy ${d.id} is ${d.status}: only a failed, rolled_back or cancelled deploy is retried`,
      {
        details: { deploy: d.id, status: d.status },
      },
    );
  }
  const request = d.request as Partial<Submission>;
  if (request.release) {
    // Retried alone it would not be part of the release, which would stay failed with its later environments never deployed.
    const { id, stage } = request.release;
    throw new ManentError(
      Code.FailedPrecondition,
      `deploy ${d.id} is stage ${stage} of release ${id}: retry the release (manent release retry ${id}), ` +
        "which deploys again from the stage that stopped and goes on through the later ones",
      { details: { deploy: d.id, release: id, stage: String(stage) } },
    );
  }
  if (request.descriptor === undefined || typeof request.descriptorFile !== "string") {
    throw new ManentError(Code.FailedPrecondition, `deploy ${d.id} cannot be retried: its record has no descriptor`, {
      details: { deploy: d.id },
    });
  }
  const resolved = resolvedOf(d);
  const fetched = stepOutput<{ sha256?: string }>(d, "fetch");
  const sha256 = fetched?.sha256 ?? resolved?.artifact.sha256;
  return {
    kind: "deploy",
    descriptor: request.descriptor,
    descriptorFile: request.descriptorFile,
    overrides: {
      ...request.overrides,
      // The version and source the retried deploy resolved (a release's stage deploys with overrides of its own).
      ...(resolved && { version: resolved.artifact.version, source: resolved.artifact.source }),
      ...(sha256 !== undefined && { sha256 }),
    },
    retry: { of: d.id, ...(resolved && { settings: recordedSettings(resolved) }) },
  };
}

/** What the deploy resolved (its resolve step's checkpointed output), if it got that far. */
export function resolvedOf(d: DeployRecord): ResolvedDeploy | undefined {
  return stepOutput<ResolvedDeploy>(d, "resolve");
}

/** What a succeeded step of the deploy returned (its checkpointed output), if it ran. */
function stepOutput<T>(d: DeployRecord, name: string): T | undefined {
  const step = d.steps.find((s) => s.name === name && s.status === "succeeded");
  if (!step?.output) return undefined;
  try {
    return JSON.parse(step.output.result) as T;
  } catch {
    return undefined;
  }
}
