import { useState } from "preact/hooks";
import type { DeployRecord } from "../../../src/core/engine/deploy-store.js";
import { Status, Time } from "../components/common.js";
import { navigate, useEventStream, useLoad } from "../hooks.js";
import type { Session } from "../session.js";
import type { Summary } from "./deploys.js";

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
      <table class="history">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Version</th>
            <th scope="col">Kind</th>
            <th scope="col">Status</th>
            <th scope="col">By</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {releases.map((d) => (
            <tr key={d.id} data-deploy={d.id}>
              <td>
                <a href={`#/deploys/${d.id}`}>
                  <Time iso={d.created_at} />
                </a>
              </td>
              <td class="num">{d.version}</td>
              <td>{d.kind}</td>
              <td>
                <Status status={d.status} />
              </td>
              <td>{d.submitted_by ?? "—"}</td>
              <td>
                {d.status === "succeeded" && current && d.version !== current.version && (
                  <button onClick={() => void rollbackTo(d)} aria-label={`Roll back to ${d.version}`}>
                    Roll back to {d.version}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
