import { useState } from "preact/hooks";
import { Time } from "../components/common.js";
import { useLoad } from "../hooks.js";
import type { Session } from "../session.js";
import type { AuditEntry as Entry } from "../../../src/storage/pg-audit-log.js";

export function AuditPage({ session }: { session: Session }) {
  const [filters, setFilters] = useState({ action: "", actor: "", outcome: "" });
  const q = new URLSearchParams(Object.entries({ ...filters, limit: "200" }).filter(([, v]) => v !== "")).toString();
  const { value, error } = useLoad(() => session.api.call<{ entries: Entry[] }>("GET", `/api/v1/audit?${q}`).then((r) => r.entries), [q]);
  const field = (name: keyof typeof filters, label: string) => (
    <label>
      {label}
      <input value={filters[name]} onChange={(e) => setFilters({ ...filters, [name]: e.currentTarget.value.trim() })} />
    </label>
  );
  return (
    <>
      <h1>Audit log</h1>
      <form class="filters" aria-label="filters" onSubmit={(e) => e.preventDefault()}>
        {field("action", "Action")}
        {field("actor", "Who")}
        {field("outcome", "Outcome")}
      </form>
      <p class="error" role="alert">
        {error ?? ""}
      </p>
      <table class="audit">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Who</th>
            <th scope="col">Tenant</th>
            <th scope="col">Action</th>
            <th scope="col">Deploy</th>
            <th scope="col">Outcome</th>
            <th scope="col">From</th>
            <th scope="col">Message</th>
          </tr>
        </thead>
        <tbody>
          {(value ?? []).map((e) => (
            <tr key={e.id} data-audit={e.action}>
              <td>
                <Time iso={e.at} />
              </td>
              <td>{e.actor ?? "—"}</td>
              <td>{e.tenant ?? "—"}</td>
              <td>{e.action}</td>
              <td>{e.deploy_id ? <a href={`#/deploys/${e.deploy_id}`}>{e.deploy_id.slice(0, 8)}</a> : "—"}</td>
              <td class={e.outcome === "ok" ? "" : "error"}>{e.outcome}</td>
              <td>{e.client_address ?? "—"}</td>
              <td>{e.message ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
