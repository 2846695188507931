import { useEffect, useState } from "preact/hooks";
import { allCodeNames } from "../../../src/core/errors.js";
import { auditActions } from "../../../src/core/identity/audit-actions.js";
import type { AuditEntry as Entry } from "../../../src/storage/pg-audit-log.js";
import { shortId, Time } from "../components/common.js";
import { DataTable, type Column } from "../components/data-table.js";
import { FilterBar, filterQuery, type Filter } from "../components/filter-bar.js";
import type { Session } from "../session.js";

/** Entries per page: the newest first, older ones a click away (the log only grows). */
const pageSize = 25;

const filters: Filter<"action" | "actor" | "outcome">[] = [
  { name: "action", label: "Action", options: [...auditActions] },
  { name: "actor", label: "Who" },
  { name: "outcome", label: "Outcome", options: ["ok", ...allCodeNames] },
];

const columns: Column<Entry>[] = [
  { label: "When", rowHeader: true, cell: (e) => <Time iso={e.at} /> },
  { label: "Who", cell: (e) => e.actor ?? "—" },
  { label: "Tenant", cell: (e) => e.tenant ?? "—" },
  { label: "Action", cell: (e) => e.action },
  { label: "Deploy", cell: (e) => (e.deploy_id ? <a href={`#/deploys/${e.deploy_id}`}>{shortId(e.deploy_id)}</a> : "—") },
  { label: "Outcome", cell: (e) => <span class={e.outcome === "ok" ? "" : "bad"}>{e.outcome}</span> },
  { label: "From", cell: (e) => e.client_address ?? "—" },
  { label: "Message", class: "wide", cell: (e) => e.message ?? "" },
];

/** The audit log, newest first, a page at a time ("Show older entries" asks for the entries before the last shown). */
export function AuditPage({ session }: { session: Session }) {
  const [filter, setFilter] = useState({ action: "", actor: "", outcome: "" });
  const [entries, setEntries] = useState<Entry[]>();
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const load = async (before: number | undefined, shown: Entry[], live: () => boolean): Promise<void> => {
    setBusy(true);
    try {
      const q = filterQuery(filter, { limit: String(pageSize + 1), ...(before !== undefined && { before: String(before) }) });
      const page = (await session.api.call<{ entries: Entry[] }>("GET", `/api/v1/audit?${q}`)).entries;
      if (!live()) return;
      // One more than shown asked for: whether there are older entries, without a count of the whole log.
      setEntries([...shown, ...page.slice(0, pageSize)]);
      setMore(page.length > pageSize);
      setError(undefined);
    } catch (err) {
      if (live()) setError(err instanceof Error ? err.message : String(err));
    } finally {
      if (live()) setBusy(false);
    }
  };
  useEffect(() => {
    let live = true;
    void load(undefined, [], () => live);
    return () => {
      live = false;
    };
  }, [filterQuery(filter)]);
  return (
    <>
      <h1>Audit log</h1>
      <FilterBar filters={filters} value={filter} onChange={setFilter} />
      <p class="error" role="alert">
        {error ?? ""}
      </p>
      <DataTable
        label="audit log"
        columns={columns}
        rows={entries}
        rowKey={(e) => e.id}
        rowAttrs={(e) => ({ "data-audit": e.action })}
        empty="No entry matches."
      />
      {more && (
        <button class="more" disabled={busy} onClick={() => void load(entries?.at(-1)?.id, entries ?? [], () => true)}>
          Show older entries
        </button>
      )}
    </>
  );
}
