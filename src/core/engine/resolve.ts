import type { UploadStore } from "../artifacts/upload-store.js";
import type { Network } from "../artifacts/network.js";
import { z } from "zod";
import type { Artifact, IgnoreRule, Target } from "../contract/index.js";
import {
  artifactSchema,
  checkSecretRef,
  deploySecretRefSchema,
  descriptorSchema,
  findEnvconfig,
  formatDeploySecretRef,
  validate,
  versionSchema,
  type Callback,
  type EnvconfigOrigin,
  type LoadedConfig,
  type RetryableStep,
} from "../config/index.js";
import { Code, ManentError } from "../errors.js";
import { cachedArtifact, checkArtifactSource, type ArtifactContext } from "./artifact-fetch.js";
import type { DeployKind } from "./deploy-store.js";
import type { PluginRegistry } from "./plugin-registry.js";
import type { RolloutSettings } from "../rollout/rollout-config.js";
import type { AnalysisSection } from "../rollout/analysis/index.js";
import { checkRolloutSettings, rolloutSecretRefs } from "../rollout/rollout-checks.js";
import { checkDeploySecret } from "../secret-stores/check-deploy-secret.js";

/** What a client submits: the descriptor as parsed from its file, and the CLI's overrides. */
export interface Submission {
  kind: DeployKind;
  descriptor: unknown;
  /** The descriptor's file name, for messages. */
  descriptorFile: string;
  overrides?: { version?: string; source?: string; sha256?: string };
  /** Rollback only: the version to return to (default: the one before the current). */
  to?: string;
  /** Set on the deploys of a release: which release and stage (1-based) ran it. */
  release?: { id: string; stage: number };
  /**
   * Set on a retry (`manent retry`): the deploy it retries, and the settings that deploy resolved
   * from its envconfig at the time (absent when it ended before resolving: today's envconfig is read).
   */
  retry?: { of: string; settings?: RecordedSettings };
  /**
   * What the envconfig said when the submission was validated, set by the server that took it: the
   * workflow, wherever and whenever it runs (a queue, another server of the fleet, a resume after a
   * crash), runs exactly these and never reads the envconfig again.
   */
  resolved?: RecordedSettings;
  /** An admin's override of the deploy windows (deploy_windows in manent.yml): the deploy runs at once; audited by the server. */
  window_override?: { reason: string; by: string };
  /**
   * Set at submission when deploy windows were configured: the workflow then looks at them before
   * it starts. Fixed in the input, so a replay after a restart with other windows takes the same steps.
   */
  windowed?: boolean;
}

/** What a deploy took from its envconfig (and manent.yml) when it was resolved: kept so a retry runs with the same. */
export type RecordedSettings = Omit<
  ResolvedDeploy,
  "kind" | "tenant" | "application" | "environment" | "artifact" | "descriptorFile" | "to"
>;

export interface StepPolicy {
  maxRetries: number;
  intervalMs: number;
  timeoutMs?: number;
}

/** Everything a deploy needs, fixed at the resolve step and checkpointed. Holds secret references, never values. */
export interface ResolvedDeploy {
  kind: DeployKind;
  tenant: string;
  application: string;
  environment: string;
  artifact: Artifact;
  plugin: string;
  targets: Target[];
  params: Record<string, string>;
  secrets: { name: string; ref: string }[];
  rollbackEnabled: boolean;
  parallel: number;
  steps: Record<RetryableStep, StepPolicy>;
  callbacks: Callback[];
  descriptorFile: string;
  envconfigFile: string | null;
  /** Where the envconfig came from: provider, path, content sha256 and, from git, the commit (absent: none found, or resolved before it was recorded). */
  envconfigOrigin?: EnvconfigOrigin;
  /** Rollback only: the version to return to, when the client named one. */
  to?: string;
  /** Waves and canary steps, when the envconfig has a `rollout` section (never for a user's rollback). */
  rollout?: RolloutSettings;
  /** The envconfig's analysis checks, for the rollout's analysis steps. */
  analysis?: AnalysisSection;
  /** The envconfig's drift settings (absent in deploys resolved before drift existed). */
  drift?: { interval?: number | undefined; heal: boolean; ignore?: IgnoreRule[] };
}

/** What of a resolved deploy came from its envconfig (and manent.yml): what a pinned submission or a retry carries. */
export function recordedSettings(r: ResolvedDeploy): RecordedSettings {
  const { kind: _kind, tenant: _t, application: _a, environment: _e, artifact: _art, descriptorFile: _f, to: _to, ...settings } = r;
  return settings;
}

/** The plugins that take `drift.ignore` (its entries name Kubernetes objects and fields). */
const ignoreListPlugins: ReadonlySet<string> = new Set(["kubernetes"]);

const validateTimeoutMs = 30_000;
const overridden = z.object({ artifact: artifactSchema });
const rollbackTo = z.object({ to: versionSchema });

/**
 * Turns a submission into a {@link ResolvedDeploy}: descriptor and overrides validated, envconfig
 * found and validated, plugin selected, secret references and the local artifact checked. Every
 * problem is `invalid_argument` naming file, field and reason; nothing is recorded before this passes.
 */
export async function resolveSubmission(
  config: LoadedConfig,
  plugins: PluginRegistry,
  s: Submission,
  io: { network: Network; uploads?: UploadStore | undefined },
  /** The id the deploy will have: an upload it names is claimed for it until its record is written (see UploadStore.claim). */
  claimFor?: string,
): Promise<ResolvedDeploy> {
  const descriptor = validate(s.descriptor, s.descriptorFile, descriptorSchema);
  if (s.to !== undefined) validate({ to: s.to }, "rollback", rollbackTo);
  const { artifact } = validate(
    {
      artifact: {
        ...descriptor.artifact,
        ...(s.overrides?.version !== undefined && { version: s.overrides.version }),
        ...(s.overrides?.source !== undefined && { source: s.overrides.source, sha256: undefined }),
        ...(s.overrides?.sha256 !== undefined && { sha256: s.overrides.sha256 }),
      },
    },
    `${s.descriptorFile} (with --version/--source/--sha256)`,
    overridden,
  );
  const claim = claimFor !== undefined && {
    claim: {
      id: claimFor,
      application: descriptor.application,
      artifact: artifact.name,
      environment: descriptor.environment,
      version: artifact.version,
    },
  };
  const artifactCtx = { config, tenant: descriptor.tenant, network: io.network, ...(io.uploads && { uploads: io.uploads }), ...claim };
  if (s.retry) await checkRetriedArtifact(artifact, artifactCtx, s.retry.of);
  else if (s.kind !== "rollback")
    await checkArtifactSource(artifact, artifactCtx).catch((err: unknown) => rethrowIn(s.descriptorFile, err));
  const recorded = s.resolved ?? s.retry?.settings;
  if (recorded) {
    const as = s.resolved ? "as resolved at submission" : "as recorded by the retried deploy";
    return {
      ...recorded,
      ...(await checkRecordedSettings(recorded, plugins, artifact, config, descriptor.tenant, as)),
      kind: s.kind,
      tenant: descriptor.tenant,
      application: descriptor.application,
      environment: descriptor.environment,
      artifact,
      descriptorFile: s.descriptorFile,
      ...(s.to !== undefined && { to: s.to }),
    };
  }

  const key = {
    tenant: descriptor.tenant,
    application: descriptor.application,
    artifact: artifact.name,
    environment: descriptor.environment,
  };
  const { envconfig, file, origin } = await findEnvconfig(config, key);
  const where = file ?? config.file;
  for (const [i, secret] of envconfig.secrets.entries()) {
    await checkDeploySecret(config, descriptor.tenant, secret.name, secret.ref).catch((err: unknown) => {
      throw new ManentError(Code.InvalidArgument, `${where}: secrets.${i}.ref: ${ManentError.from(err).message}`, {
        details: { file: where, field: `secrets.${i}.ref` },
      });
    });
  }
  const plugin = await plugins.select(envconfig.plugin, artifact, where);
  if (envconfig.drift.ignore.length > 0 && !ignoreListPlugins.has(plugin.name)) {
    throw new ManentError(
      Code.InvalidArgument,
      `${where}: drift.ignore: plugin ${plugin.name} does not take an ignore list (its entries name Kubernetes objects and fields: only the kubernetes plugin does)`,
      { details: { file: where, field: "drift.ignore" } },
    );
  }
  // The envconfig may be the server's cached, frozen one: what the deploy carries is copied from it.
  const rollout = s.kind === "rollback" || !envconfig.rollout ? undefined : structuredClone(envconfig.rollout);
  if (rollout) {
    checkRolloutSettings(rollout, envconfig.analysis, plugin.name, rollout.canary ? await plugin.capabilities() : [], where);
    await checkRolloutSecrets(rollout, envconfig.analysis, where);
  }

  const policy = (step: RetryableStep): StepPolicy => ({
    maxRetries: envconfig.steps[step]?.max_retries ?? envconfig.max_retries,
    intervalMs: envconfig.retry_interval,
    ...(envconfig.steps[step]?.timeout !== undefined
      ? { timeoutMs: envconfig.steps[step]!.timeout }
      : step === "validate"
        ? { timeoutMs: validateTimeoutMs }
        : {}),
  });

  return {
    kind: s.kind,
    tenant: descriptor.tenant,
    application: descriptor.application,
    environment: descriptor.environment,
    artifact,
    plugin: plugin.name,
    // Every target carries its identity (unique: the envconfig schema refuses two alike), so plugins name results by it.
    targets: envconfig.targets.map((t) => ({
      host: t.host,
      ...(t.port !== undefined && { port: t.port }),
      labels: { ...t.labels },
      name: t.name ?? t.host,
    })),
    params: { ...envconfig.params },
    secrets: envconfig.secrets.map((x) => ({ name: x.name, ref: formatDeploySecretRef(x.ref) })),
    rollbackEnabled: envconfig.rollback.enabled,
    parallel: envconfig.parallel,
    steps: {
      fetch: policy("fetch"),
      validate: policy("validate"),
      checkpoint: policy("checkpoint"),
      deploy: policy("deploy"),
      rollback: policy("rollback"),
    },
    callbacks: structuredClone(envconfig.callbacks),
    drift: structuredClone(envconfig.drift),
    descriptorFile: s.descriptorFile,
    envconfigFile: file ?? null,
    ...(origin && { envconfigOrigin: origin }),
    ...(s.to !== undefined && { to: s.to }),
    ...(rollout && { rollout }),
    ...(rollout && envconfig.analysis && { analysis: structuredClone(envconfig.analysis) }),
  };
}

/**
 * A retry deploys the bytes the retried deploy fetched (pinned by their sha256): from the server's
 * cache when it still holds them, else from the same source, which must still be there (the fetch
 * step then refuses other bytes). A source gone is a failed precondition naming the artifact.
 */
async function checkRetriedArtifact(artifact: Artifact, ctx: ArtifactContext, retried: string): Promise<void> {
  if (cachedArtifact(artifact, ctx)) return;
  await checkArtifactSource(artifact, ctx).catch((err: unknown) => {
    const pinned = artifact.sha256 ? ` (sha256 ${artifact.sha256})` : "";
    throw new ManentError(
      Code.FailedPrecondition,
      `deploy ${retried} cannot be retried: artifact ${artifact.name} ${artifact.version}${pinned} can no longer be fetched: ${ManentError.from(err).message}`,
      { cause: err, details: { deploy: retried, artifact: artifact.name, ...(artifact.sha256 && { sha256: artifact.sha256 }) } },
    );
  });
}

/**
 * The checks a recorded envconfig passes again: its secrets still readable, its plugin still
 * configured, its rollout settings still supported by that plugin. Messages name the envconfig file.
 */
async function checkRecordedSettings(
  recorded: RecordedSettings,
  plugins: PluginRegistry,
  artifact: Artifact,
  config: LoadedConfig,
  tenant: string,
  as: string,
): Promise<Pick<ResolvedDeploy, "plugin">> {
  const where = `${recorded.envconfigFile ?? config.file} (${as})`;
  for (const [i, secret] of recorded.secrets.entries()) {
    await checkDeploySecret(config, tenant, secret.name, deploySecretRefSchema.parse(secret.ref)).catch((err: unknown) => {
      throw new ManentError(Code.InvalidArgument, `${where}: secrets.${i}.ref: ${ManentError.from(err).message}`, {
        details: { file: where, field: `secrets.${i}.ref` },
      });
    });
  }
  const plugin = await plugins.select(recorded.plugin, artifact, where);
  const rollout = recorded.rollout;
  if (rollout) {
    checkRolloutSettings(rollout, recorded.analysis, plugin.name, rollout.canary ? await plugin.capabilities() : [], where);
    await checkRolloutSecrets(rollout, recorded.analysis, where);
  }
  return { plugin: plugin.name };
}

/** The rollout's bearer tokens must be readable now; each is read again at its call. */
async function checkRolloutSecrets(rollout: RolloutSettings, analysis: AnalysisSection | undefined, where: string): Promise<void> {
  for (const { field, ref } of rolloutSecretRefs(rollout, analysis)) {
    await checkSecretRef("bearer_token", ref).catch((err: unknown) => {
      throw new ManentError(Code.InvalidArgument, `${where}: ${field}: ${ManentError.from(err).message}`, {
        details: { file: where, field },
      });
    });
  }
}

function rethrowIn(file: string, err: unknown): never {
  const e = ManentError.from(err);
  throw new ManentError(e.code, `${file}: ${e.message}`, { cause: err, details: { file, ...e.details } });
}
