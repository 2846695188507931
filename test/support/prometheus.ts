import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { stringify } from "yaml";

export interface PrometheusOptions {
  /** host:port of the exporters to scrape (job "exporter"). */
  targets: string[];
  /** Scrape and rule evaluation interval (default 1s: tests wait for data, so it is short). */
  interval?: string;
}

export interface PrometheusServer {
  /** Base URL, e.g. http://127.0.0.1:41234 (what an analysis check's `address` takes). */
  url: string;
  /** Runs an instant query and returns its single value, or undefined when the result is empty. */
  value(query: string): Promise<number | undefined>;
  /**
   * Polls an instant query until its value meets `accept` (a new scrape arrived): the event tests
   * await instead of sleeping. Throws with the last value after `timeoutMs`.
   */
  waitFor(query: string, accept: (value: number | undefined) => boolean, timeoutMs?: number): Promise<number | undefined>;
  /** Stops the server (SIGTERM, then SIGKILL after 10 s) and deletes its data. Idempotent. */
  stop(): Promise<void>;
}

/**
 * A real Prometheus (Debian's `prometheus` package, installed by scripts/ci/prometheus.sh) on a
 * free loopback port with a config and data dir of its own. Resolves once the first scrape of the
 * exporters is queryable (`up{job="exporter"}` is 1 for each), so a test starts with data.
 */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusServer> {
  const dir = await mkdtemp(join(tmpdir(), "manent-prometheus-"));
  const interval = options.interval ?? "1s";
  const config = join(dir, "prometheus.yml");
  await writeFile(
    config,
    stringify({
      global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
      scrape_configs: [{ job_name: "exporter", static_configs: [{ targets: options.targets }] }],
    }),
  );
  const child = spawn(
    "prometheus",
    [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, "data")}`, "--web.listen-address=127.0.0.1:0"],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  let log = "";
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      log = (log + chunk).slice(-20_000);
      const m = /msg="Listening on" address=127\.0\.0\.1:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    child.once("error", reject);
    child.once("exit", (code, signal) => reject(new Error(`prometheus exited (${code ?? signal}) before listening:\n${log}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  async function value(query: string): Promise<number | undefined> {
    const res = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query })}`);
    const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: unknown } };
    if (body.status !== "success" || !body.data) throw new Error(`query ${query}: ${body.error ?? res.status}`);
    const { resultType, result } = body.data;
    if (resultType === "scalar") return Number((result as [number, string])[1]);
    const vector = result as { value: [number, string] }[];
    if (vector.length === 0) return undefined;
    if (vector.length > 1) throw new Error(`query ${query}: ${vector.length} series`);
    return Number(vector[0]!.value[1]);
  }

  async function waitFor(query: string, accept: (v: number | undefined) => boolean, timeoutMs = 30_000): Promise<number | undefined> {
    const deadline = Date.now() + timeoutMs;
    let last: number | undefined | string;
    for (;;) {
      try {
        last = await value(query);
        if (accept(last)) return last;
      } catch (err) {
        last = (err as Error).message; // not ready yet (connection refused during start-up)
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${query}; last: ${last}\n${log.slice(-2000)}`);
      await delay(100); // the poll interval; the awaited event is the scrape showing up in a query
    }
  }

  let stopped: Promise<void> | undefined;
  const server: PrometheusServer = {
    url,
    value,
    waitFor,
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
          await exited;
          clearTimeout(timer);
        }
        process.removeListener("exit", killOnExit);
        await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
  try {
    await waitFor(`count(up{job="exporter"} == 1)`, (v) => v === options.targets.length, 60_000);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}
