import { Counter, Histogram, type Registry } from "prom-client";

/** The HTTP API's requests, by method, route (as registered) and status code. */
export interface HttpMetrics {
  observe(method: string, route: string, status: number, seconds: number): void;
}

export function httpMetrics(registry: Registry): HttpMetrics {
  const requests = new Counter({
    name: "manent_http_requests_total",
    help: "HTTP requests answered, by method, route (as registered, e.g. /api/v1/deploys/:id; unmatched for no route) and status code.",
    labelNames: ["method", "route", "code"],
    registers: [registry],
  });
  const duration = new Histogram({
    name: "manent_http_request_duration_seconds",
    help: "Time from a request's arrival to the end of its answer's handler, by method and route. Event streams count until they close.",
    labelNames: ["method", "route"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  // A method a client makes up is not a new series.
  const methods = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
  return {
    observe(method, route, status, seconds) {
      const m = methods.has(method) ? method : "OTHER";
      requests.inc({ method: m, route, code: String(status) });
      duration.observe({ method: m, route }, seconds);
    },
  };
}
