import { useState } from "preact/hooks";
import { Time } from "../components/common.js";
import { DataTable, type Column } from "../components/data-table.js";
import { FilterBar, type Filter } from "../components/filter-bar.js";
import { useLoad } from "../hooks.js";
import { can } from "../../../src/core/identity/policy.js";
import type { PluginListing as Plugin } from "../../../src/core/contract/hosted-plugin.js";
import type { Session } from "../session.js";

const filters: Filter<"name" | "kind">[] = [
  { name: "name", label: "Name" },
  { name: "kind", label: "Kind", options: ["builtin", "external"] },
];

export function PluginsPage({ session }: { session: Session }) {
  const { value, error, setValue } = useLoad(
    () => session.api.call<{ plugins: Plugin[] }>("GET", "/api/v1/plugins").then((r) => r.plugins),
    [],
  );
  const [filter, setFilter] = useState({ name: "", kind: "" });
  const [busy, setBusy] = useState<string>();
  const [failure, setFailure] = useState<string>();
  // Plugins serve every tenant: only a grant over all of them allows a restart (the server checks it too).
  const mayRestart = can(session.me, "plugin_restart", { tenant: "*" });
  const restart = async (p: Plugin) => {
    const running = p.status === "up" ? " Its calls in flight fail and their steps retry on the new process." : "";
    if (!confirm(`Restart plugin ${p.name}?${running}`)) return;
    setBusy(p.name);
    setFailure(undefined);
    try {
      const after = await session.api.call<Plugin>("POST", `/api/v1/plugins/${encodeURIComponent(p.name)}/restart`);
      setValue((prev) => (prev ?? []).map((x) => (x.name === after.name ? after : x)));
    } catch (err) {
      setFailure(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(undefined);
    }
  };
  const columns: Column<Plugin>[] = [
    { label: "Name", rowHeader: true, cell: (p) => p.name },
    { label: "Kind", cell: (p) => p.kind },
    {
      label: "Capabilities",
      cell: (p) =>
        p.capabilities === null ? (
          <span class="muted">{p.status === "start_failed" ? "unknown: its start failed" : "not started yet"}</span>
        ) : (
          p.capabilities.join(", ") || "none"
        ),
    },
    {
      label: "State",
      attrs: () => ({ "data-status": "" }),
      cell: (p) => (
        <>
          {p.status?.replace(/_/g, " ") ?? (p.kind === "builtin" ? "in process" : "—")}
          {p.last_error && <p class="error">{p.last_error}</p>}
        </>
      ),
    },
    { label: "Restarts", class: "num", cell: (p) => p.restarts ?? "—" },
    { label: "Last start", cell: (p) => <Time iso={p.last_start ?? p.capabilities_as_of ?? null} /> },
    ...(mayRestart
      ? [
          {
            label: "Actions",
            hideLabel: true,
            cell: (p: Plugin) =>
              p.kind === "external" && (
                <button disabled={busy !== undefined} onClick={() => void restart(p)}>
                  {busy === p.name ? "Restarting…" : "Restart"}
                </button>
              ),
          },
        ]
      : []),
  ];
  const name = filter.name.toLowerCase();
  const rows = value?.filter((p) => p.name.toLowerCase().includes(name) && (!filter.kind || p.kind === filter.kind));
  return (
    <>
      <h1>Plugins</h1>
      <FilterBar filters={filters} value={filter} onChange={setFilter} />
      <p class="error" role="alert">
        {failure ?? error ?? ""}
      </p>
      <DataTable
        label="plugins"
        columns={columns}
        rows={rows}
        rowKey={(p) => p.name}
        rowAttrs={(p) => ({ "data-plugin": p.name })}
        empty="No plugin matches."
      />
    </>
  );
}
