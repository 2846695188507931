import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { scriptSecret, scriptTargets, type ReleaseJSON, type Report, type ResultJSON, type StepJSON } from "./report.js";

/**
 * The conformance suite of the sample plugins (examples/go-plugin, examples/ts-plugin): what the
 * interop script's report and the files under `base` must show, whichever host ran the script
 * and whichever language the plugin is written in.
 */
export async function assertSampleConformance(report: Report, base: string): Promise<void> {
  assert.deepEqual(
    [...report.capabilities].sort(),
    ["current_release", "dry_run", "parallel_targets", "rollback", "scale", "slots", "testers", "traffic_router"],
    "capabilities announced at Configure",
  );
  const steps = new Map(report.steps.map((s) => [s.name, s]));
  const step = (name: string): StepJSON => {
    const s = steps.get(name);
    assert.ok(s, `step ${name} missing from the report: ${report.steps.map((x) => x.name).join(", ")}`);
    return s;
  };
  const ok = (name: string): StepJSON => {
    const s = step(name);
    assert.equal(s.error, undefined, `step ${name} failed: ${JSON.stringify(s.error)}`);
    return s;
  };
  const failed = (name: string, code: string): NonNullable<StepJSON["error"]> => {
    const s = step(name);
    assert.ok(s.error, `step ${name} should fail with ${code}, got ${JSON.stringify(s.result)}`);
    assert.equal(s.error.code, code, `step ${name}: ${s.error.message}`);
    assert.ok(!s.error.message.includes(scriptSecret), `step ${name}: an error message carries the secret value`);
    return s.error;
  };
  const result = (name: string, status: string): ResultJSON => {
    const r = ok(name).result as ResultJSON;
    assert.equal(r.plugin, report.plugin, `${name}: result.plugin`);
    assert.deepEqual(
      r.targets.map((t) => t.host),
      [...scriptTargets],
      `${name}: targets keep their order`,
    );
    assert.deepEqual(
      r.targets.map((t) => t.status),
      scriptTargets.map(() => status),
      `${name}: statuses`,
    );
    for (const t of r.targets) {
      if (t.duration_ms !== undefined)
        assert.ok(Number.isInteger(t.duration_ms) && t.duration_ms >= 0, `${name}: duration_ms ${t.duration_ms}`);
    }
    return r;
  };
  const releases = (name: string, version: string): void => {
    const rs = ok(name).result as ReleaseJSON[];
    assert.deepEqual(
      rs.map((r) => [r.host, r.version]),
      scriptTargets.map((h) => [h, version]),
      `${name}: current releases`,
    );
  };
  const current = async (host: string): Promise<string> => (await readFile(path.join(base, host, "current"), "utf8")).trim();

  ok("validate");
  failed("validate_bad_param", "aborted");

  // Deploy reads the secret through the broker, once, and writes each target.
  const deployed = result("deploy_v1", "deployed");
  assert.deepEqual(ok("deploy_v1").secrets_read, ["deploy-key"], "deploy_v1 reads deploy-key through the host");
  for (const t of deployed.targets) assert.equal(t.details?.path, path.join(base, t.host), `deploy_v1: details.path of ${t.host}`);
  const keyHash = createHash("sha256").update(scriptSecret).digest("hex");
  for (const host of scriptTargets) {
    assert.equal((await readFile(path.join(base, host, "key.sha256"), "utf8")).trim(), keyHash, `${host}/key.sha256 is the secret's hash`);
    assert.equal(await readFile(path.join(base, host, "releases", "v1", "artifact"), "utf8"), "web\n", `${host}/releases/v1/artifact`);
  }
  releases("current_after_v1", "v1");

  // A dry-run changes nothing.
  result("dry_run_v2", "ready");
  releases("current_after_dry_run", "v1");

  result("deploy_v2", "deployed");
  const rolledBack = result("rollback", "rolled_back");
  for (const t of rolledBack.targets) assert.equal(t.details?.version, "v1", `rollback: ${t.host} back to v1`);
  assert.deepEqual(ok("rollback").secrets_read, [], "rollback needs no secret");
  releases("current_after_rollback", "v1");

  // A bad param fails permanently, before any secret or target.
  const bad = failed("deploy_bad_param", "aborted");
  assert.equal(bad.partial_result, undefined, "deploy_bad_param has no per-target results");
  assert.deepEqual(step("deploy_bad_param").secrets_read, [], "deploy_bad_param reads no secret");

  // A secret the host does not have keeps its not_found code across both hops.
  failed("deploy_missing_secret", "not_found");
  assert.deepEqual(step("deploy_missing_secret").secrets_read, ["deploy-key"]);

  // One target fails: the error (retryable) still carries every target's outcome.
  const partial = failed("deploy_fail_beta", "unknown").partial_result;
  assert.ok(partial, "deploy_fail_beta: the per-target results survive the error (manent-error-bin)");
  assert.deepEqual(
    partial.targets.map((t) => [t.host, t.status]),
    [
      ["alpha", "deployed"],
      ["beta", "failed"],
      ["gamma", "skipped"],
    ],
    "deploy_fail_beta statuses",
  );
  assert.match(partial.targets[1]!.error ?? "", /beta/, "the failed target says why");
  // (current is overwritten by the rollout below: the release directories show what deploy_fail_beta wrote)
  for (const host of scriptTargets) {
    const wrote = await readFile(path.join(base, host, "releases", "v3", "artifact"), "utf8").then(
      () => true,
      () => false,
    );
    assert.equal(wrote, host === "alpha", `${host}/releases/v3 after deploy_fail_beta`);
  }

  const none = ok("deploy_no_targets");
  assert.deepEqual((none.result as ResultJSON).targets, [], "deploy_no_targets: no targets");
  assert.deepEqual(none.secrets_read, [], "a deploy with no targets reads no secret");

  await assertRolloutConformance(report, base, { ok, failed, result: (name) => ok(name).result });
}

interface StepCheckers {
  ok(name: string): StepJSON;
  failed(name: string, code: string): NonNullable<StepJSON["error"]>;
  result(name: string): StepJSON["result"];
}

/**
 * The percentage rollout of the script: v4 goes through the nine calls to promotion, v5 is
 * reverted after a failed weight change, and the state PrepareSlots returned reaches every call
 * (the plugin's journal, <base>/rollout.jsonl, records what each call received).
 */
async function assertRolloutConformance(report: Report, base: string, { ok, failed, result }: StepCheckers): Promise<void> {
  const read = async (...parts: string[]): Promise<string | undefined> =>
    (await readFile(path.join(base, ...parts), "utf8").catch(() => undefined))?.trim();

  const state = result("prepare_slots") as Record<string, string>;
  assert.deepEqual(state, { live_slot: "blue", candidate_slot: "green", prepared_by: "dep-v4" }, "prepare_slots: the state");
  assert.deepEqual(ok("prepare_slots").secrets_read, []);
  const candidate = result("deploy_candidate") as ResultJSON;
  assert.deepEqual(
    candidate.targets.map((t) => [t.host, t.status, t.details?.slot]),
    scriptTargets.map((h) => [h, "deployed", "green"]),
    "deploy_candidate",
  );
  assert.deepEqual(ok("deploy_candidate").secrets_read, ["deploy-key"], "deploy_candidate reads deploy-key through the host");
  assert.deepEqual(result("route_testers"), { slot: "green", header: "X-Manent-Slot: green" }, "route_testers: details for the user");
  for (const w of [10, 50, 100]) {
    ok(`set_weight_${w}`);
    ok(`scale_${w}`);
    assert.equal(result(`weight_${w}`), w, `CandidateWeight after SetCandidateWeight(${w})`);
  }
  ok("promote");
  ok("retire_previous");
  assert.deepEqual(
    (result("current_after_promote") as ReleaseJSON[]).map((r) => [r.host, r.version]),
    scriptTargets.map((h) => [h, "v4"]),
    "after promote every target runs v4",
  );
  for (const host of scriptTargets) {
    assert.equal(await read(host, "live-slot"), "green", `${host}: green serves after promote`);
    assert.equal(await read(host, "slots", "green"), "v4", `${host}: slot green holds v4`);
    assert.equal(await read(host, "slots", "blue"), undefined, `${host}: the previous slot is retired`);
  }

  // The revert path: the weight change to 50 fails, traffic goes back to 0, the candidate goes.
  assert.deepEqual(result("revert_prepare_slots"), { live_slot: "green", candidate_slot: "blue", prepared_by: "dep-v5" });
  ok("revert_deploy_candidate");
  ok("revert_set_weight_10");
  assert.match(failed("revert_set_weight_50", "aborted").message, /failing at weight 50 as param fail_weight asks/);
  ok("revert_set_weight_0");
  ok("revert_candidate");
  assert.equal(result("revert_weight"), 0, "CandidateWeight after the revert");
  assert.deepEqual(
    (result("current_after_revert") as ReleaseJSON[]).map((r) => [r.host, r.version]),
    scriptTargets.map((h) => [h, "v4"]),
    "after the revert every target still runs v4",
  );
  for (const host of scriptTargets) {
    assert.equal(await read(host, "slots", "blue"), undefined, `${host}: the reverted candidate slot is empty`);
    assert.equal(await read(host, "live-slot"), "green", `${host}: green still serves`);
  }
  // Without the state, the plugin cannot know its slots: a host that dropped Request.traffic fails here.
  assert.match(
    failed("deploy_candidate_without_traffic", "failed_precondition").message,
    /Request\.traffic lacks the state PrepareSlots returned/,
  );

  // What each call received: the state of the PrepareSlots before it, in every call.
  const journal = ((await read("rollout.jsonl")) ?? "")
    .split("\n")
    .map((l) => JSON.parse(l) as { call: string; traffic: Record<string, string>; weight?: number });
  const v5State = result("revert_prepare_slots") as Record<string, string>;
  const weighted = (w: number) =>
    [
      ["SetCandidateWeight", w],
      ["ScaleCandidate", w],
      ["CandidateWeight", undefined],
    ] as const;
  const expected: [string, number | undefined, Record<string, string>][] = [
    ["PrepareSlots", undefined, {}],
    ...[
      ["DeployCandidate", undefined],
      ["RouteTesters", undefined],
      ...weighted(10),
      ...weighted(50),
      ...weighted(100),
      ["PromoteCandidate", undefined],
      ["RetirePrevious", undefined],
    ].map(([c, w]) => [c, w, state] as [string, number | undefined, Record<string, string>]),
    ["PrepareSlots", undefined, {}],
    ...[
      ["DeployCandidate", undefined],
      ["SetCandidateWeight", 10],
      ["SetCandidateWeight", 50],
      ["SetCandidateWeight", 0],
      ["RevertCandidate", undefined],
      ["CandidateWeight", undefined],
    ].map(([c, w]) => [c, w, v5State] as [string, number | undefined, Record<string, string>]),
    ["DeployCandidate", undefined, {}],
  ];
  assert.deepEqual(
    journal.map((e) => [e.call, e.weight, e.traffic]),
    expected,
    "the calls the plugin received, each with the traffic state PrepareSlots returned",
  );
}
