import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { planWaves, waveName } from "../../src/core/rollout/wave-plan.js";
import { wavesSchema } from "../../src/core/rollout/rollout-config.js";

const t = (host: string, region?: string, az?: string) => ({ host, labels: { ...(region && { region }), ...(az && { az }) } });
const plan = (targets: ReturnType<typeof t>[], settings: unknown) =>
  planWaves(targets, wavesSchema.parse(settings)).map((w) => `${waveName(w)}: ${w.targets.map((x) => x.host).join(",")}`);

describe("wave planning", () => {
  const fleet = [t("a1", "eu", "a"), t("u1", "us", "b"), t("b1", "eu", "b"), t("u2", "us", "a"), t("a2", "eu", "a"), t("n1")];

  it("groups by region then az, values in order of first appearance in the fleet", () => {
    assert.deepEqual(plan(fleet, { by: ["region", "az"] }), [
      "region=eu az=a: a1,a2",
      "region=eu az=b: b1",
      "region=us az=a: u2",
      "region=us az=b: u1",
      "region=(none) az=(none): n1",
    ]);
  });

  it("puts the stated order first, then the other values as they appear", () => {
    assert.deepEqual(plan(fleet, { by: ["region"], order: { region: ["us", "nowhere"] } }), [
      "region=us: u1,u2",
      "region=eu: a1,b1,a2",
      "region=(none): n1",
    ]);
  });

  it("cuts groups into batches, and without labels cuts the whole fleet", () => {
    assert.deepEqual(plan(fleet, { by: ["region"], batch_size: 2 }), [
      "region=eu: a1,b1",
      "region=eu: a2",
      "region=us: u1,u2",
      "region=(none): n1",
    ]);
    assert.deepEqual(plan(fleet, { batch_size: 4 }), ["all targets: a1,u1,b1,u2", "all targets: a2,n1"]);
  });

  it("plans one wave without settings and none without targets", () => {
    assert.deepEqual(plan(fleet, {}), ["all targets: a1,u1,b1,u2,a2,n1"]);
    assert.deepEqual(planWaves([], undefined), []);
  });
});
