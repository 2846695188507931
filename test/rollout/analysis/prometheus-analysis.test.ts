import assert from "node:assert/strict";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../../src/core/errors.js";
import { analysisCheckSchema, judge, measure, type AnalysisCheck, type Measurement } from "../../../src/core/rollout/analysis/index.js";
import { startMetricsExporter, type MetricsExporter } from "../../support/metrics-exporter.js";
import { startPrometheus, type PrometheusServer } from "../../support/prometheus.js";
import { loopbackOutbound, outboundUnder } from "../../support/outbound-rules.js";

/**
 * Analysis checks against a real Prometheus (Debian's package) scraping an exporter whose request
 * and error counters the test sets: healthy, over the threshold, empty, multi-series, NaN, error
 * answers, hostile variables, a bearer token through an authenticating proxy, and Prometheus down.
 */
describe("analysis: Prometheus checks", () => {
  let exporter: MetricsExporter;
  let prometheus: PrometheusServer;
  const vars = (version: string, extra: Record<string, string> = {}) => ({
    MANENT_VERSION: version,
    MANENT_APPLICATION: "shop",
    MANENT_ENVIRONMENT: "prod",
    MANENT_TENANT: "acme",
    MANENT_PREVIOUS_VERSION: "1.0.0",
    MANENT_WEIGHT: "10",
    ...extra,
  });
  const errorRate = 'sum(app_errors_total{version="${MANENT_VERSION}"}) / sum(app_requests_total{version="${MANENT_VERSION}"})';
  const check = (fields: Record<string, unknown> = {}, spec: Record<string, unknown> = {}): AnalysisCheck =>
    analysisCheckSchema.parse({
      prometheus: { address: globalAddress(), query: errorRate, ...spec },
      success_condition: "result < 0.05",
      ...fields,
    });
  const globalAddress = () => prometheus.url;
  const signal = () => new AbortController().signal;

  before(async () => {
    exporter = await startMetricsExporter();
    exporter.serve("1.0.0", 1000, 10); // 1 % errors: healthy
    exporter.serve("2.0.0", 1000, 10);
    prometheus = await startPrometheus({ targets: [exporter.target] });
  });
  after(async () => {
    await prometheus?.stop();
    await exporter?.stop();
  });

  it("a healthy error rate is successful, and the check succeeds after count measurements", async () => {
    const c = check({ count: 2 });
    const first = await measure("error-rate", c, vars("1.0.0"), signal(), loopbackOutbound);
    assert.equal(first.verdict, "successful", first.message);
    assert.equal(first.check, "error-rate");
    assert.equal(first.value, 0.01);
    assert.ok(!Number.isNaN(Date.parse(first.at)));
    assert.match(first.message, /error-rate: 0\.01 meets success_condition "result < 0\.05"/);
    assert.deepEqual(judge(c, [first]), { state: "running" });
    const second = await measure("error-rate", c, vars("1.0.0"), signal(), loopbackOutbound);
    const verdict = judge(c, [first, second]);
    assert.equal(verdict.state, "successful");
  });

  it("an error rate over the threshold fails, naming the check, the value and the condition", async () => {
    exporter.serve("2.0.0", 1000, 590); // 600 errors of 2000: 0.3
    await prometheus.waitFor('sum(app_errors_total{version="2.0.0"})', (v) => v === 600);
    const c = check({ failure_limit: 1, count: 5 });
    const first = await measure("error-rate", c, vars("2.0.0"), signal(), loopbackOutbound);
    assert.equal(first.verdict, "failed");
    assert.equal(first.value, 0.3);
    assert.equal(first.message, 'error-rate: 0.3 does not meet success_condition "result < 0.05"');
    assert.deepEqual(judge(c, [first]), { state: "running" }, "one failure is within failure_limit 1");
    const second = await measure("error-rate", c, vars("2.0.0"), signal(), loopbackOutbound);
    const verdict = judge(c, [first, second]);
    assert.equal(verdict.state, "failed");
    assert.match(
      verdict.reason!,
      /^error-rate: 0\.3 does not meet success_condition "result < 0\.05" \(2 failed measurements, failure_limit 1\)$/,
    );
  });

  it("with both conditions, a value between them is inconclusive and the failure condition wins", async () => {
    const between = await measure(
      "error-rate",
      check({ success_condition: "result < 0.005", failure_condition: "result >= 0.2" }),
      vars("1.0.0"),
      signal(),
      loopbackOutbound,
    );
    assert.equal(between.verdict, "inconclusive");
    assert.match(between.message, /0\.01 meets neither success_condition "result < 0\.005" nor failure_condition "result >= 0\.2"/);
    const bad = await measure(
      "error-rate",
      check({ success_condition: "result < 0.5", failure_condition: "result >= 0.2" }),
      vars("2.0.0"),
      signal(),
      loopbackOutbound,
    );
    assert.equal(bad.verdict, "failed");
    assert.match(bad.message, /0\.3 meets failure_condition "result >= 0\.2"/);
  });

  it("an empty result is inconclusive, and the check fails once inconclusive_limit is exceeded", async () => {
    const c = check({ inconclusive_limit: 1 });
    const measurements: Measurement[] = [];
    for (let i = 0; i < 2; i++) measurements.push(await measure("error-rate", c, vars("9.9.9"), signal(), loopbackOutbound));
    for (const m of measurements) {
      assert.equal(m.verdict, "inconclusive");
      assert.equal(m.value, null);
      assert.match(m.message, /error-rate: the query returned an empty result/);
    }
    assert.deepEqual(judge(c, measurements.slice(0, 1)), { state: "running" });
    const verdict = judge(c, measurements);
    assert.equal(verdict.state, "failed");
    assert.match(verdict.reason!, /empty result .*\(2 inconclusive measurements, inconclusive_limit 1\)/);
  });

  it("several series, NaN, a matrix and an error answer are inconclusive", async () => {
    const multi = await measure("ratio", check({}, { query: "app_error_ratio" }), vars("1.0.0"), signal(), loopbackOutbound);
    assert.equal(multi.verdict, "inconclusive");
    assert.match(multi.message, /returned 2 series, not one/);
    const nan = await measure(
      "ratio",
      check({}, { query: 'app_error_ratio{version="${MANENT_VERSION}"} * 0 / 0' }),
      vars("1.0.0"),
      signal(),
      loopbackOutbound,
    );
    assert.equal(nan.verdict, "inconclusive");
    assert.equal(nan.value, "NaN");
    const matrix = await measure(
      "ratio",
      check({}, { query: 'app_error_ratio{version="${MANENT_VERSION}"}[1m]' }),
      vars("1.0.0"),
      signal(),
      loopbackOutbound,
    );
    assert.equal(matrix.verdict, "inconclusive");
    assert.match(matrix.message, /returned a matrix, not a number/);
    const bad = await measure("ratio", check({}, { query: "sum(app_error_ratio" }), vars("1.0.0"), signal(), loopbackOutbound);
    assert.equal(bad.verdict, "inconclusive");
    assert.match(bad.message, new RegExp(`Prometheus at ${prometheus.url} answered 400 bad_data: .*parse error`));
  });

  it("a scalar result is measured", async () => {
    const m = await measure(
      "ratio",
      check({}, { query: 'scalar(app_error_ratio{version="${MANENT_VERSION}"})' }),
      vars("1.0.0"),
      signal(),
      loopbackOutbound,
    );
    assert.equal(m.verdict, "successful", m.message);
    assert.equal(m.value, 0.01);
  });

  it("variables are substituted and escaped: a hostile value cannot change the query", async () => {
    // Unescaped, this value would close the matcher and add `or vector(0)`: one healthy-looking 0.
    const hostile = 'x"} or vector(0) or app_error_ratio{version="x';
    const injected = await measure(
      "ratio",
      check({}, { query: 'app_error_ratio{version="${MANENT_VERSION}"}' }),
      vars(hostile),
      signal(),
      loopbackOutbound,
    );
    assert.equal(injected.verdict, "inconclusive", injected.message);
    assert.match(injected.message, /empty result/);
    // In a regex matcher the value matches literally: ".*" does not select every version.
    const regex = check({}, { query: "app_error_ratio{version=~'${MANENT_VERSION}'}" });
    assert.equal((await measure("ratio", regex, vars("1.0.0"), signal(), loopbackOutbound)).value, 0.01);
    assert.match((await measure("ratio", regex, vars(".*"), signal(), loopbackOutbound)).message, /empty result/);
    // Outside a string only a name or a number may stand.
    const bare = check(
      { success_condition: "result > 0" },
      { query: 'count(app_error_ratio{version="${MANENT_VERSION}"}) * ${MANENT_WEIGHT}' },
    );
    const weighted = await measure("weighted", bare, vars("1.0.0"), signal(), loopbackOutbound);
    assert.equal(weighted.value, 10, weighted.message);
    const refused = await measure("weighted", bare, vars("1.0.0", { MANENT_WEIGHT: "0 or vector(1)" }), signal(), loopbackOutbound);
    assert.equal(refused.verdict, "failed");
    assert.match(refused.message, /weighted: variable \$\{MANENT_WEIGHT\} = "0 or vector\(1\)" cannot stand outside a string/);
  });

  it("a bearer token from a secret reference reaches Prometheus and never appears in a measurement", async () => {
    const token = "s3cret-token-value";
    process.env.MANENT_TEST_PROM_TOKEN = token;
    const proxy = await startAuthProxy(prometheus.url, token);
    try {
      const good = await measure(
        "error-rate",
        check({}, { address: proxy.url, bearer_token: "env:MANENT_TEST_PROM_TOKEN" }),
        vars("1.0.0"),
        signal(),
        loopbackOutbound,
      );
      assert.equal(good.verdict, "successful", good.message);
      const missing = await measure("error-rate", check({}, { address: proxy.url }), vars("1.0.0"), signal(), loopbackOutbound);
      assert.equal(missing.verdict, "inconclusive");
      assert.match(missing.message, /answered 401/);
      // The proxy echoes the header it got: the token must be redacted from the message anyway.
      process.env.MANENT_TEST_PROM_TOKEN = `${token}-old`;
      const wrong = await measure(
        "error-rate",
        check({}, { address: proxy.url, bearer_token: "env:MANENT_TEST_PROM_TOKEN" }),
        vars("1.0.0"),
        signal(),
        loopbackOutbound,
      );
      assert.equal(wrong.verdict, "inconclusive");
      assert.ok(!JSON.stringify(wrong).includes(token), JSON.stringify(wrong));
      delete process.env.MANENT_TEST_PROM_TOKEN;
      const unset = await measure(
        "error-rate",
        check({}, { address: proxy.url, bearer_token: "env:MANENT_TEST_PROM_TOKEN" }),
        vars("1.0.0"),
        signal(),
        loopbackOutbound,
      );
      assert.equal(unset.verdict, "inconclusive");
      assert.match(unset.message, /environment variable MANENT_TEST_PROM_TOKEN is not set/);
    } finally {
      delete process.env.MANENT_TEST_PROM_TOKEN;
      await proxy.stop();
    }
  });

  it("a cancelled measurement throws canceled", async () => {
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(measure("error-rate", check(), vars("1.0.0"), controller.signal, loopbackOutbound), (err: unknown) => {
      return err instanceof ManentError && err.code === Code.Canceled;
    });
  });

  it("Prometheus down is inconclusive, and the check fails after inconclusive_limit", async () => {
    const c = check({ inconclusive_limit: 2, count: 3 });
    await prometheus.stop();
    const measurements: Measurement[] = [];
    let state = judge(c, measurements);
    while (state.state === "running") {
      measurements.push(await measure("error-rate", c, vars("1.0.0"), signal(), loopbackOutbound));
      state = judge(c, measurements);
    }
    assert.equal(measurements.length, 3);
    for (const m of measurements) {
      assert.equal(m.verdict, "inconclusive");
      assert.match(m.message, new RegExp(`^error-rate: Prometheus at ${prometheus.url} unreachable: .*ECONNREFUSED`));
    }
    assert.equal(state.state, "failed");
    assert.match(state.reason!, /unreachable.*\(3 inconclusive measurements, inconclusive_limit 2\)$/);
  });
});

/** An authenticating reverse proxy in front of Prometheus, as many installations have. */
async function startAuthProxy(upstream: string, token: string): Promise<{ url: string; stop(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${token}`) {
      const body = JSON.stringify({
        status: "error",
        errorType: "unauthorized",
        error: `refused ${req.headers.authorization ?? "no credentials"}`,
      });
      res.writeHead(401, { "content-type": "application/json" }).end(body);
      return;
    }
    const target = new URL(req.url!, upstream);
    const forward = httpRequest(target, { method: req.method, headers: { ...req.headers, host: target.host } }, (upstreamRes) => {
      res.writeHead(upstreamRes.statusCode!, upstreamRes.headers);
      upstreamRes.pipe(res);
    });
    forward.on("error", (err) => res.writeHead(502).end(err.message));
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
