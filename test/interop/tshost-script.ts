import { codeName, ManentError } from "../../src/core/errors.js";
import { ResultError } from "../../src/core/contract/result-error.js";
import type {
  Deployer,
  DryRunner,
  Logger,
  ReleaseInspector,
  Request,
  Rollbacker,
  SecretsAccessor,
  SlotDeployer,
  SlotScaler,
  TargetRelease,
  TesterRouter,
  TrafficRouter,
} from "../../src/plugin.js";
import { Code } from "../../src/plugin.js";
import { scriptSecret, scriptTargets, type Report, type StepJSON } from "./report.js";

/** Serves the script's secrets like the Go host's and records which names the plugin read. */
function recordingSecrets(values: Record<string, string>): SecretsAccessor & { read: string[] } {
  const read: string[] = [];
  return {
    read,
    async secret(name: string): Promise<string> {
      read.push(name);
      const v = values[name];
      if (v === undefined) throw new ManentError(Code.NotFound, `secret ${JSON.stringify(name)} is not defined`);
      return v;
    },
  };
}

/**
 * The interop script of sdk/go/cmd/manent-gohost/script.go, run through manent's TypeScript host
 * (the engine's view of a plugin: a Deployer), producing the same report, percentage rollout
 * included: each rollout call gets a fresh request carrying the state PrepareSlots returned.
 */
export async function runTsHostScript(d: Deployer, capabilities: string[], base: string, logger: Logger): Promise<Report> {
  const report: Report = { plugin: d.name(), capabilities, steps: [] };
  const dr = d as Deployer & DryRunner & ReleaseInspector & Rollbacker;
  const signal = new AbortController().signal;
  const secretsOk = { "deploy-key": scriptSecret };
  const good = { base };
  const bad = { base: "relative/dir" };
  const request = (version: string, params: Record<string, string>, values: Record<string, string>, edit?: (r: Request) => void) => {
    const secrets = recordingSecrets(values);
    const req: Request = {
      deploymentId: `dep-${version}`,
      tenant: "acme",
      application: "web",
      environment: "staging",
      artifact: { type: "file", name: "web", version, source: "inline" },
      targets: scriptTargets.map((host) => ({ host, labels: {} })),
      params,
      secrets,
      parallelism: 2,
      logger,
      signal,
    };
    edit?.(req);
    return { req, secrets };
  };
  const step = async (name: string, secrets: { read: string[] }, call: () => Promise<unknown>): Promise<unknown> => {
    const s: StepJSON = { name, secrets_read: [] };
    let value: unknown;
    try {
      value = await call();
      s.result = (value ?? null) as StepJSON["result"];
    } catch (err) {
      const e = ManentError.from(err);
      s.error = { code: codeName(e.code), message: e.message, details: e.details };
      if (err instanceof ResultError) s.error.partial_result = err.result;
    }
    s.secrets_read = [...secrets.read].sort();
    report.steps.push(s);
    return value;
  };
  const deploy = (
    name: string,
    version: string,
    params: Record<string, string>,
    values: Record<string, string>,
    edit?: (r: Request) => void,
  ) => {
    const { req, secrets } = request(version, params, values, edit);
    return step(name, secrets, () => d.deploy(req));
  };
  const current = async (name: string): Promise<TargetRelease[]> => {
    const { req, secrets } = request("", good, secretsOk);
    return ((await step(name, secrets, () => dr.currentRelease(req))) ?? []) as TargetRelease[];
  };

  let r = request("v1", good, secretsOk);
  await step("validate", r.secrets, () => d.validate(r.req));
  r = request("v1", bad, secretsOk);
  await step("validate_bad_param", r.secrets, () => d.validate(r.req));
  await deploy("deploy_v1", "v1", good, secretsOk);
  await current("current_after_v1");
  r = request("v2", good, secretsOk);
  await step("dry_run_v2", r.secrets, () => dr.dryRun(r.req));
  const checkpoint = await current("current_after_dry_run");
  await deploy("deploy_v2", "v2", good, secretsOk);
  r = request("v2", good, secretsOk);
  await step("rollback", r.secrets, () => dr.rollback({ ...r.req, releases: checkpoint }));
  await current("current_after_rollback");
  await deploy("deploy_bad_param", "v3", bad, secretsOk);
  await deploy("deploy_missing_secret", "v3", good, {});
  await deploy("deploy_fail_beta", "v3", { base, fail_host: "beta" }, secretsOk, (q) => (q.parallelism = 1));
  await deploy("deploy_no_targets", "v3", good, secretsOk, (q) => (q.targets = []));
  await rollout(d as Deployer & SlotDeployer & TrafficRouter & TesterRouter & SlotScaler, base, request, step, current);
  return report;
}

type RequestFactory = (
  version: string,
  params: Record<string, string>,
  values: Record<string, string>,
  edit?: (r: Request) => void,
) => { req: Request; secrets: { read: string[] } };

/** The rollout part of script.go's run, step for step (same names, same requests). */
async function rollout(
  d: Deployer & SlotDeployer & TrafficRouter & TesterRouter & SlotScaler,
  base: string,
  request: RequestFactory,
  step: (name: string, secrets: { read: string[] }, call: () => Promise<unknown>) => Promise<unknown>,
  current: (name: string) => Promise<TargetRelease[]>,
): Promise<void> {
  const secretsOk = { "deploy-key": scriptSecret };
  const good = { base };
  let traffic: Record<string, string> | undefined;
  const slotCall = (name: string, version: string, params: Record<string, string>, call: (r: Request) => Promise<unknown>) => {
    const { req, secrets } = request(version, params, secretsOk, (q) => {
      if (traffic) q.traffic = traffic;
    });
    return step(name, secrets, () => call(req));
  };
  const weighted = async (version: string, params: Record<string, string>, weight: number) => {
    await slotCall(`set_weight_${weight}`, version, params, (r) => d.setCandidateWeight(r, weight));
    await slotCall(`scale_${weight}`, version, params, (r) => d.scaleCandidate(r, weight));
    await slotCall(`weight_${weight}`, version, params, (r) => d.candidateWeight(r));
  };
  const prepare = async (name: string, version: string) => {
    traffic = undefined;
    traffic = (await slotCall(name, version, good, (r) => d.prepareSlots(r))) as Record<string, string> | undefined;
  };

  await prepare("prepare_slots", "v4");
  await slotCall("deploy_candidate", "v4", good, (r) => d.deployCandidate(r));
  await slotCall("route_testers", "v4", good, (r) => d.routeTesters(r));
  for (const w of [10, 50, 100]) await weighted("v4", good, w);
  await slotCall("promote", "v4", good, (r) => d.promoteCandidate(r));
  await slotCall("retire_previous", "v4", good, (r) => d.retirePrevious(r));
  await current("current_after_promote");

  const failing = { base, fail_weight: "50" };
  await prepare("revert_prepare_slots", "v5");
  await slotCall("revert_deploy_candidate", "v5", failing, (r) => d.deployCandidate(r));
  for (const w of [10, 50, 0]) await slotCall(`revert_set_weight_${w}`, "v5", failing, (r) => d.setCandidateWeight(r, w));
  await slotCall("revert_candidate", "v5", failing, (r) => d.revertCandidate(r));
  await slotCall("revert_weight", "v5", failing, (r) => d.candidateWeight(r));
  await current("current_after_revert");

  traffic = undefined;
  await slotCall("deploy_candidate_without_traffic", "v6", good, (r) => d.deployCandidate(r));
}
