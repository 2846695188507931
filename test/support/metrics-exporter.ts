import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Registry } from "prom-client";

/**
 * A small application exporter that Prometheus scrapes: request and error counters and an error
 * ratio per version, all set by the test (`app_requests_total`, `app_errors_total`,
 * `app_error_ratio`, each labelled `version`), and `app_error_ratio_at_weight` (labels `version`,
 * `weight`): the error ratio a release shows under a share of the traffic, as one that fails only
 * under load does.
 */
export interface MetricsExporter {
  /** host:port, as a Prometheus scrape target. */
  target: string;
  /** Counts requests of a version, `errors` of them failed, and sets its error ratio gauge to the lifetime ratio. */
  serve(version: string, requests: number, errors: number): void;
  /** Sets the error ratio a version shows at a canary weight. */
  errorRatioAtWeight(version: string, weight: number, ratio: number): void;
  stop(): Promise<void>;
}

export async function startMetricsExporter(): Promise<MetricsExporter> {
  const registry = new Registry();
  const requests = new Counter({ name: "app_requests_total", help: "Requests served.", labelNames: ["version"], registers: [registry] });
  const errors = new Counter({ name: "app_errors_total", help: "Requests that failed.", labelNames: ["version"], registers: [registry] });
  const ratio = new Gauge({
    name: "app_error_ratio",
    help: "Failed requests over all requests.",
    labelNames: ["version"],
    registers: [registry],
  });
  const atWeight = new Gauge({
    name: "app_error_ratio_at_weight",
    help: "Failed requests over all requests, by the candidate's share of the traffic.",
    labelNames: ["version", "weight"],
    registers: [registry],
  });
  const totals = new Map<string, { requests: number; errors: number }>();
  const server: Server = createServer((req, res) => {
    if (req.url !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: Error) => res.writeHead(500).end(err.message),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    target: `127.0.0.1:${port}`,
    serve(version, n, failed) {
      requests.inc({ version }, n);
      if (failed > 0) errors.inc({ version }, failed);
      const t = totals.get(version) ?? { requests: 0, errors: 0 };
      t.requests += n;
      t.errors += failed;
      totals.set(version, t);
      ratio.set({ version }, t.requests === 0 ? 0 : t.errors / t.requests);
    },
    errorRatioAtWeight(version, weight, r) {
      atWeight.set({ version, weight: String(weight) }, r);
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
