import { useState } from "preact/hooks";
import type { DeployRecord } from "../../../src/core/engine/deploy-store.js";
import { Status, Time } from "../components/common.js";
import { useEventStream, useLoad } from "../hooks.js";
import { oneTenant } from "../api.js";
import type { Session } from "../session.js";

export type Summary = Omit<DeployRecord, "steps" | "targets" | "request" | "rollout">;
const statuses = ["", "queued", "running", "succeeded", "failed", "rolled_back", "cancelled"];

export function historyHref(d: Pick<Summary, "tenant" | "application" | "artifact" | "environment">): string {
  return `#/history/${[d.tenant, d.application, d.artifact, d.environment].map(encodeURIComponent).join("/")}`;
}

/** Deploys, newest first, with filters; new deploys and status changes arrive on the tenant's event stream. */
export function DeploysPage({ session }: { session: Session }) {
  const [filters, setFilters] = useState({ tenant: "", application: "", environment: "", status: "" });
  const query = new URLSearchParams(Object.entries({ ...filters, limit: "100" }).filter(([, v]) => v !== "")).toString();
  const {
    value: deploys,
    error,
    setValue,
  } = useLoad(() => session.api.call<{ deploys: Summary[] }>("GET", `/api/v1/deploys?${query}`).then((r) => r.deploys), [query]);
  const matches = (d: Summary): boolean =>
    (!filters.tenant || d.tenant === filters.tenant) &&
    (!filters.application || d.application === filters.application) &&
    (!filters.environment || d.environment === filters.environment) &&
    (!filters.status || d.status === filters.status);
  useEventStream(
    session.api,
    "/api/v1/events",
    (e) => {
      if (e.type === "deploy.created") {
        const d = e.data as unknown as Summary;
        if (matches(d)) setValue((prev) => [d, ...(prev ?? []).filter((x) => x.id !== d.id)]);
      } else if (e.type === "deploy.status") {
        setValue((prev) =>
          (prev ?? [])
            .map((d) => (d.id === e.deploy_id ? { ...d, ...(e.data as Partial<Summary>) } : d))
            .filter((d) => d.id !== e.deploy_id || matches(d)),
        );
      }
    },
    {},
    [query],
  );
  const field = (name: keyof typeof filters, label: string) => (
    <label>
      {label}
      <input value={filters[name]} onChange={(e) => setFilters({ ...filters, [name]: e.currentTarget.value.trim() })} />
    </label>
  );
  return (
    <>
      <h1>Deploys</h1>
      <form class="filters" aria-label="filters" onSubmit={(e) => e.preventDefault()}>
        {oneTenant(session.me) === undefined && field("tenant", "Tenant")}
        {field("application", "Application")}
        {field("environment", "Environment")}
        <label>
          Status
          <select value={filters.status} onChange={(e) => setFilters({ ...filters, status: e.currentTarget.value })}>
            {statuses.map((s) => (
              <option value={s}>{s === "" ? "any" : s.replace("_", " ")}</option>
            ))}
          </select>
        </label>
      </form>
      <p class="error" role="alert">
        {error ?? ""}
      </p>
      <table class="deploys">
        <thead>
          <tr>
            <th scope="col">Created</th>
            <th scope="col">Tenant</th>
            <th scope="col">Application</th>
            <th scope="col">Environment</th>
            <th scope="col">Version</th>
            <th scope="col">Kind</th>
            <th scope="col">Status</th>
            <th scope="col">By</th>
          </tr>
        </thead>
        <tbody aria-live="polite">
          {(deploys ?? []).map((d) => (
            <tr key={d.id} data-deploy={d.id}>
              <td>
                <a href={`#/deploys/${d.id}`}>
                  <Time iso={d.created_at} />
                </a>
              </td>
              <td>{d.tenant}</td>
              <td>
                <a href={historyHref(d)}>{d.application}</a>
              </td>
              <td>{d.environment}</td>
              <td class="num">{d.version}</td>
              <td>{d.kind.replace("_", "-")}</td>
              <td>
                <Status status={d.status} />
              </td>
              <td>{d.submitted_by ?? "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {deploys?.length === 0 && <p class="muted">No deploys match.</p>}
    </>
  );
}
