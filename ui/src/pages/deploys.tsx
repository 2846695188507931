import { useState } from "preact/hooks";
import type { DeployRecord } from "../../../src/core/engine/deploy-store.js";
import { Status, Time } from "../components/common.js";
import { DataTable, type Column } from "../components/data-table.js";
import { FilterBar, filterQuery, type Filter } from "../components/filter-bar.js";
import { useEventStream, useLoad } from "../hooks.js";
import { oneTenant } from "../api.js";
import type { Session } from "../session.js";

export type Summary = Omit<DeployRecord, "steps" | "targets" | "request" | "rollout">;
const statuses = ["queued", "running", "succeeded", "failed", "rolled_back", "cancelled"];
/** Deploys shown at first, and added by each "Show more" (the API lists at most 1,000). */
const pageSize = 50;

export function historyHref(d: Pick<Summary, "tenant" | "application" | "artifact" | "environment">): string {
  return `#/history/${[d.tenant, d.application, d.artifact, d.environment].map(encodeURIComponent).join("/")}`;
}

const columns: Column<Summary>[] = [
  {
    label: "Created",
    rowHeader: true,
    cell: (d) => (
      <a href={`#/deploys/${d.id}`}>
        <Time iso={d.created_at} />
      </a>
    ),
  },
  { label: "Tenant", cell: (d) => d.tenant },
  { label: "Application", cell: (d) => <a href={historyHref(d)}>{d.application}</a> },
  { label: "Environment", cell: (d) => d.environment },
  { label: "Version", class: "num", cell: (d) => d.version },
  { label: "Kind", cell: (d) => d.kind.replace("_", "-") },
  { label: "Status", cell: (d) => <Status status={d.status} /> },
  { label: "By", cell: (d) => d.submitted_by ?? "—" },
];

/** Deploys, newest first, with filters; new deploys and status changes arrive on the tenant's event stream. */
export function DeploysPage({ session }: { session: Session }) {
  const [filters, setFilters] = useState({ tenant: "", application: "", environment: "", status: "" });
  const [limit, setLimit] = useState(pageSize);
  const query = filterQuery(filters, { limit: String(limit) });
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
  const shown: Filter<keyof typeof filters>[] = [
    ...(oneTenant(session.me) === undefined ? [{ name: "tenant" as const, label: "Tenant" }] : []),
    { name: "application", label: "Application" },
    { name: "environment", label: "Environment" },
    { name: "status", label: "Status", options: statuses },
  ];
  return (
    <>
      <h1>Deploys</h1>
      <FilterBar filters={shown} value={filters} onChange={(f) => (setFilters(f), setLimit(pageSize))} />
      <p class="error" role="alert">
        {error ?? ""}
      </p>
      <DataTable
        label="deploys"
        columns={oneTenant(session.me) === undefined ? columns : columns.filter((c) => c.label !== "Tenant")}
        rows={deploys}
        rowKey={(d) => d.id}
        rowAttrs={(d) => ({ "data-deploy": d.id })}
        empty="No deploys match."
        live
      />
      {deploys !== undefined && deploys.length >= limit && limit < 1000 && (
        <button class="more" onClick={() => setLimit(Math.min(limit + pageSize, 1000))}>
          Show more
        </button>
      )}
    </>
  );
}
