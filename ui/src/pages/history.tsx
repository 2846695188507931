import { useState } from "preact/hooks";
import type { DeployRecord } from "../../../src/core/engine/deploy-store.js";
import { Status, Time } from "../components/common.js";
import { DataTable, type Column } from "../components/data-table.js";
import { FilterBar, type Filter } from "../components/filter-bar.js";
import { navigate, useEventStream, useLoad } from "../hooks.js";
import type { Session } from "../session.js";
import type { Summary } from "./deploys.js";

const historyFilters: Filter<"status">[] = [
  { name: "status", label: "Status", options: ["queued", "running", "succeeded", "failed", "rolled_back", "cancelled"] },
];

/** An application's environment: its releases, newest first, each a click from being rolled back to. */
export function HistoryPage({
  session,
  tenant,
  application,
  artifact,
  environment,
}: {
  session: Session;
  tenant: string;
  application: string;
  artifact: string;
  environment: string;
}) {
  const q = new URLSearchParams({ tenant, application, artifact, environment, limit: "100" }).toString();
  const {
    value: deploys,
    error,
    setValue,
  } = useLoad(() => session.api.call<{ deploys: Summary[] }>("GET", `/api/v1/deploys?${q}`).then((r) => r.deploys), [q]);
  const [actionError, setActionError] = useState<string>();
  useEventStream(
    session.api,
    "/api/v1/events",
    (e) => {
      const d = e.data as unknown as Summary;
      if (
        e.type === "deploy.created" &&
        d.application === application &&
        d.environment === environment &&
        d.tenant === tenant &&
        d.artifact === artifact
      )
        setValue((prev) => [d, ...(prev ?? [])]);
      if (e.type === "deploy.status")
        setValue((prev) => (prev ?? []).map((x) => (x.id === e.deploy_id ? { ...x, ...(e.data as Partial<Summary>) } : x)));
    },
    {},
    [q],
  );
  const releases = (deploys ?? []).filter((d) => d.kind !== "dry_run");
  const current = releases.find((d) => d.status === "succeeded");
  const [filters, setFilters] = useState({ status: "" });
  const rollbackTo = async (d: Summary): Promise<void> => {
    if (!confirm(`Roll ${application} in ${environment} back to ${d.version}?`)) return;
    setActionError(undefined);
    try {
      const full = await session.api.call<DeployRecord>("GET", `/api/v1/deploys/${d.id}`);
      const descriptor = (full.request as { descriptor?: unknown }).descriptor;
      const out = await session.api.call<{ id: string }>("POST", "/api/v1/rollbacks", {
        descriptor,
        descriptor_file: "web UI",
        to: d.version,
      });
      navigate("deploys", out.id);
    } catch (err) {
      setActionError((err as Error).message);
    }
  };
  const columns: Column<Summary>[] = [
    {
      label: "When",
      rowHeader: true,
      cell: (d) => (
        <a href={`#/deploys/${d.id}`}>
          <Time iso={d.created_at} />
        </a>
      ),
    },
    { label: "Version", class: "num", cell: (d) => d.version },
    { label: "Kind", cell: (d) => d.kind.replace("_", "-") },
    { label: "Status", cell: (d) => <Status status={d.status} /> },
    { label: "By", cell: (d) => d.submitted_by ?? "—" },
    {
      label: "Actions",
      hideLabel: true,
      cell: (d) =>
        d.status === "succeeded" &&
        current &&
        d.version !== current.version && (
          <button onClick={() => void rollbackTo(d)} aria-label={`Roll back to ${d.version}`}>
            Roll back to {d.version}
          </button>
        ),
    },
  ];
  return (
    <>
      <h1>
        {application} → {environment}
      </h1>
      <p class="muted">
        Tenant {tenant} · artifact {artifact} · current release: <strong class="num">{current?.version ?? "none"}</strong>
      </p>
      <p class="error" role="alert">
        {error ?? actionError ?? ""}
      </p>
      <FilterBar filters={historyFilters} value={filters} onChange={setFilters} />
      <DataTable
        label="releases"
        columns={columns}
        rows={deploys && releases.filter((d) => !filters.status || d.status === filters.status)}
        rowKey={(d) => d.id}
        rowAttrs={(d) => ({ "data-deploy": d.id })}
        empty="No release matches."
      />
    </>
  );
}
