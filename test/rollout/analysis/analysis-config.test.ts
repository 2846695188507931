import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { envconfigSchema } from "../../../src/core/config/envconfig.js";
import { loadYamlFile } from "../../../src/core/config/yaml-file.js";
import { Code, ManentError } from "../../../src/core/errors.js";
import { compileCondition, evaluateCondition } from "../../../src/core/rollout/analysis/condition.js";
import { judge, type AnalysisCheck, type Measurement } from "../../../src/core/rollout/analysis/index.js";
import { renderPromql } from "../../../src/core/rollout/analysis/variables.js";

const label = "envconfig/acme/shop/shop/prod.yml";

describe("analysis: the envconfig key", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "manent-analysis-config-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function load(checks: Record<string, unknown>) {
    const file = join(dir, "prod.yml");
    await writeFile(file, stringify({ plugin: "noop", analysis: { checks } }));
    return loadYamlFile(file, envconfigSchema, label);
  }
  const prometheus = { address: "http://127.0.0.1:9090", query: 'sum(rate(errors{version="${MANENT_VERSION}"}[1m]))' };

  async function refused(checks: Record<string, unknown>, field: string, reason: RegExp): Promise<void> {
    await assert.rejects(load(checks), (err: unknown) => {
      assert.ok(err instanceof ManentError, String(err));
      assert.equal(err.code, Code.InvalidArgument);
      assert.equal(err.details.file, label);
      assert.equal(err.details.field, field, err.message);
      assert.ok(err.message.startsWith(`${label}: ${field}: `), err.message);
      assert.match(err.message, reason);
      return true;
    });
  }

  it("a well-formed check loads with its defaults", async () => {
    const envconfig = await load({
      "error-rate": { prometheus, success_condition: "result < 0.05", interval: "30s", count: 5, failure_limit: 1 },
      health: {
        http: { url: "https://shop.example/health?v=${MANENT_VERSION}", json_field: "checks.db", bearer_token: "env:HEALTH_TOKEN" },
        success_condition: 'result == "up"',
      },
    });
    const rate = envconfig.analysis!.checks["error-rate"]!;
    assert.equal(rate.interval, 30_000);
    assert.equal(rate.count, 5);
    assert.equal(rate.inconclusive_limit, 2);
    assert.equal(rate.prometheus!.timeout, 10_000);
    const health = envconfig.analysis!.checks.health!;
    assert.equal(health.http!.expected_status, undefined, "any 2xx");
    assert.equal(health.http!.method, "GET");
    assert.deepEqual(health.http!.bearer_token, { kind: "env", name: "HEALTH_TOKEN" });
    assert.equal((await load({})).analysis!.checks && Object.keys((await load({})).analysis!.checks).length, 0);
  });

  it("bad conditions are refused at load, naming the file and the field", async () => {
    const cases: [string, RegExp][] = [
      ["result <", /"result <": unexpected end of condition at column 9/],
      ["result = 0.05", /unexpected "=" \(compare with "=="\) at column 8/],
      ["errors < 0.05", /unknown name "errors" \(the measured value is "result"\)/],
      ["0.05 > 0.01", /never reads "result"/],
      ["result", /result is a number, not a condition/],
      ['result == "ok"', /result is a number and cannot equal "ok"/],
      ["0 < result < 1", /comparisons cannot be chained/],
      ["result < 0.05)", /unexpected "\)" at column 14/],
      ["eval('x') or result < 1", /unknown name "eval"/],
      ["x".repeat(501), /longer than 500 characters/],
    ];
    for (const [condition, reason] of cases) {
      await refused({ "error-rate": { prometheus, success_condition: condition } }, "analysis.checks.error-rate.success_condition", reason);
    }
    await refused(
      { e: { prometheus, success_condition: "result < 1", failure_condition: "result >> 2" } },
      "analysis.checks.e.failure_condition",
      /unexpected ">"/,
    );
  });

  it("malformed checks are refused at load", async () => {
    await refused({ e: { prometheus } }, "analysis.checks.e.success_condition", /needs success_condition or failure_condition/);
    await refused({ e: { success_condition: "result < 1" } }, "analysis.checks.e", /exactly one of prometheus or http/);
    await refused(
      { e: { prometheus, http: { url: "http://a/" }, success_condition: "result < 1" } },
      "analysis.checks.e",
      /exactly one of prometheus or http/,
    );
    await refused(
      { e: { prometheus: { ...prometheus, query: 'up{v="${VERSION}"}' }, success_condition: "result < 1" } },
      "analysis.checks.e.prometheus.query",
      /unknown variable \$\{VERSION\}/,
    );
    await refused(
      { e: { prometheus: { ...prometheus, query: 'up{v="x}' }, success_condition: "result < 1" } },
      "analysis.checks.e.prometheus.query",
      /unterminated string/,
    );
    await refused(
      { e: { prometheus: { ...prometheus, address: "ftp://p/" }, success_condition: "result < 1" } },
      "analysis.checks.e.prometheus.address",
      /must be http\(s\)/,
    );
    await refused(
      { e: { prometheus: { ...prometheus, address: "http://user:pw@p/" }, success_condition: "result < 1" } },
      "analysis.checks.e.prometheus.address",
      /must not carry credentials/,
    );
    await refused(
      { e: { prometheus: { ...prometheus, bearer_token: "s3cret" }, success_condition: "result < 1" } },
      "analysis.checks.e.prometheus.bearer_token",
      /file:\/absolute\/path/,
    );
    await refused(
      { e: { http: { url: "http://a/" }, success_condition: "result < 1" } },
      "analysis.checks.e.success_condition",
      /needs http\.json_field/,
    );
    await refused({ e: { http: { url: "http://a/", json_field: "x" } } }, "analysis.checks.e.http.json_field", /needs success_condition/);
    await refused(
      { e: { http: { url: "http://a/", json_field: "a..b" }, success_condition: "result" } },
      "analysis.checks.e.http.json_field",
      /dotted path/,
    );
    await refused({ e: { http: { url: "http://a/${NOPE}" } } }, "analysis.checks.e.http.url", /unknown variable/);
    await refused(
      { e: { prometheus, success_condition: "result < 1", interval: "soon" } },
      "analysis.checks.e.interval",
      /is not a duration/,
    );
    await refused({ e: { prometheus, success_condition: "result < 1", count: 0 } }, "analysis.checks.e.count", /./);
    await refused({ "Bad Name": { prometheus, success_condition: "result < 1" } }, "analysis.checks.Bad Name", /check names are lowercase/);
    await refused(
      { e: { prometheus, success_condition: "result < 1", failure_limt: 1 } },
      "analysis.checks.e",
      /unknown field "failure_limt"/,
    );
  });
});

describe("analysis: conditions", () => {
  const holds = (source: string, result: number | string | boolean | null, kind: "number" | "json" = "json") =>
    evaluateCondition(compileCondition(source, kind), result);

  it("compare, combine and negate", () => {
    assert.equal(holds("result < 0.05", 0.01), true);
    assert.equal(holds("result < 0.05", 0.05), false);
    assert.equal(holds("result <= 0.05", 0.05), true);
    assert.equal(holds("result >= -1e3", -1000), true);
    assert.equal(holds("result > 0 and result < 1", 0.5), true);
    assert.equal(holds("result > 0 && result < 1", 1), false);
    assert.equal(holds("result < 0 or result > 1", 2), true);
    assert.equal(holds("not (result < 0 || result > 1)", 0.3), true);
    assert.equal(holds("!(result == 'ok')", "ok"), false);
    assert.equal(holds('result == "a \\"b\\""', 'a "b"'), true);
    assert.equal(holds("result == null", null), true);
    assert.equal(holds("result != 1", "1"), true, "a string never equals a number");
    assert.equal(holds("result", true), true);
    assert.equal(holds("result > 1 or result < 0 and false", 2), true, "and binds tighter than or");
  });

  it("undecidable values throw instead of guessing", () => {
    assert.throws(() => holds("result < 1", "0.5"), /cannot order "0\.5" < 1/);
    assert.throws(() => holds("result", 3), /3 is not true or false/);
    assert.throws(() => holds("result and true", "yes"), /"yes" is not true or false/);
  });
});

describe("analysis: judging measurements", () => {
  const check = { count: 3, failure_limit: 1, inconclusive_limit: 1 } as AnalysisCheck;
  const m = (verdict: Measurement["verdict"], value: number | null = 0.01): Measurement => ({
    check: "error-rate",
    at: new Date(0).toISOString(),
    value,
    verdict,
    message: `error-rate: ${value} (${verdict})`,
  });

  it("runs until count conclusive measurements, not counting inconclusive ones", () => {
    assert.deepEqual(judge(check, []), { state: "running" });
    assert.equal(judge(check, [m("successful"), m("inconclusive"), m("successful")]).state, "running");
    const done = judge(check, [m("successful"), m("inconclusive"), m("failed", 0.2), m("successful")]);
    assert.equal(done.state, "successful");
    assert.match(done.reason!, /2 of 3 measurements successful/);
  });

  it("fails when a limit is exceeded, with the deciding measurement's message", () => {
    const failed = judge(check, [m("failed", 0.2), m("successful"), m("failed", 0.3)]);
    assert.equal(failed.state, "failed");
    assert.equal(failed.reason, "error-rate: 0.3 (failed) (2 failed measurements, failure_limit 1)");
    const inconclusive = judge(check, [m("inconclusive", null), m("inconclusive", null)]);
    assert.equal(inconclusive.state, "failed");
    assert.match(inconclusive.reason!, /2 inconclusive measurements, inconclusive_limit 1/);
  });
});

describe("analysis: PromQL variables", () => {
  const vars = { MANENT_VERSION: "1.0", MANENT_WEIGHT: "25" };
  it("escape by context", () => {
    assert.equal(renderPromql('up{v="${MANENT_VERSION}"}', { MANENT_VERSION: 'a"b\\c' }), 'up{v="a\\"b\\\\c"}');
    assert.equal(renderPromql("up{v='${MANENT_VERSION}'}", { MANENT_VERSION: "it's" }), "up{v='it\\'s'}");
    assert.equal(renderPromql('up{v=~"${MANENT_VERSION}"}', vars), 'up{v=~"1\\\\.0"}');
    assert.equal(renderPromql("up{v=~`${MANENT_VERSION}`}", vars), "up{v=~`1\\.0`}");
    assert.equal(renderPromql('up{v="\\"${MANENT_VERSION}"} * ${MANENT_WEIGHT}', vars), 'up{v="\\"1.0"} * 25');
    assert.equal(renderPromql("up # ${MANENT_VERSION}\n* ${MANENT_WEIGHT}", vars), "up # 1.0\n* 25");
    assert.throws(() => renderPromql("up{v=`${MANENT_VERSION}`}", { MANENT_VERSION: "a`b" }), /backtick/);
    assert.throws(() => renderPromql("up > ${MANENT_WEIGHT}", { MANENT_WEIGHT: "on" }), /cannot stand outside a string/);
    assert.throws(() => renderPromql("up > ${MANENT_WEIGHT}", { MANENT_WEIGHT: "" }), /cannot stand outside a string/);
    assert.throws(() => renderPromql('up{v="${MANENT_VERSION}"}', { MANENT_VERSION: "a\nb" }), /control characters/);
    assert.throws(() => renderPromql('up{v="${MANENT_VERSION}"}', {}), /has no value in this deploy/);
  });
});
