import { useState } from "preact/hooks";
import type { ReleaseSummary } from "../../../src/core/release/release-store.js";
import { Status, Time } from "../components/common.js";
import { DataTable, type Column } from "../components/data-table.js";
import { FilterBar, filterQuery, type Filter } from "../components/filter-bar.js";
import { useEventStream, useLoad } from "../hooks.js";
import type { Session } from "../session.js";

const statuses = ["running", "succeeded", "failed", "cancelled"];

export const releaseHref = (id: string): string => `#/releases/${encodeURIComponent(id)}`;

/** "waiting for approval", "soaking", or the release's stage "2 of 3". */
export function releasePosition(r: Pick<ReleaseSummary, "status" | "waiting" | "current_stage" | "environments">): string {
  if (r.status !== "running") return "";
  if (r.waiting)
    return r.waiting.kind === "soak" ? "soaking" : r.waiting.kind === "analysis" ? "analysing" : `waiting for ${r.waiting.kind}`;
  return r.current_stage === null ? "starting" : "deploying";
}

const columns: Column<ReleaseSummary>[] = [
  {
    label: "Created",
    rowHeader: true,
    cell: (r) => (
      <a href={releaseHref(r.id)}>
        <Time iso={r.created_at} />
      </a>
    ),
  },
  { label: "Application", cell: (r) => `${r.tenant}/${r.application}` },
  { label: "Version", class: "num", cell: (r) => r.version },
  { label: "Path", cell: (r) => r.environments.join(" → ") },
  {
    label: "Status",
    cell: (r) => (
      <>
        <Status status={r.status} /> <span class="muted">{releasePosition(r)}</span>
      </>
    ),
  },
  { label: "By", cell: (r) => r.submitted_by ?? "—" },
];

/** Releases, newest first; new ones and their progress arrive on the event stream. */
export function ReleasesPage({ session }: { session: Session }) {
  const [filters, setFilters] = useState({ application: "", status: "" });
  const query = filterQuery(filters, { limit: "100" });
  const {
    value: releases,
    error,
    setValue,
  } = useLoad(() => session.api.call<{ releases: ReleaseSummary[] }>("GET", `/api/v1/releases?${query}`).then((r) => r.releases), [query]);
  const matches = (r: ReleaseSummary): boolean =>
    (!filters.application || r.application === filters.application) && (!filters.status || r.status === filters.status);
  useEventStream(
    session.api,
    "/api/v1/events",
    (e) => {
      const id = e.release_id;
      if (!id) return;
      if (e.type === "release.created") {
        const r = { ...(e.data as unknown as ReleaseSummary), waiting: null, current_stage: null };
        if (matches(r)) setValue((prev) => [r, ...(prev ?? []).filter((x) => x.id !== id)]);
      } else if (e.type === "release.status" || e.type === "release.updated") {
        setValue((prev) => (prev ?? []).map((r) => (r.id === id ? { ...r, ...(e.data as Partial<ReleaseSummary>) } : r)));
      }
    },
    {},
    [query],
  );
  const shown: Filter<keyof typeof filters>[] = [
    { name: "application", label: "Application" },
    { name: "status", label: "Status", options: statuses },
  ];
  return (
    <>
      <h1>Releases</h1>
      <FilterBar filters={shown} value={filters} onChange={setFilters} />
      <p class="error" role="alert">
        {error ?? ""}
      </p>
      <DataTable
        label="releases"
        columns={columns}
        rows={releases}
        rowKey={(r) => r.id}
        rowAttrs={(r) => ({ "data-release": r.id })}
        empty="No releases match."
        live
      />
    </>
  );
}
