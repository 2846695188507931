import { useState } from "preact/hooks";
import { Time } from "../components/common.js";
import { useLoad } from "../hooks.js";
import { can } from "../../../src/core/identity/policy.js";
import type { PluginListing as Plugin } from "../../../src/core/contract/hosted-plugin.js";
import type { Session } from "../session.js";

export function PluginsPage({ session }: { session: Session }) {
  const { value, error, setValue } = useLoad(
    () => session.api.call<{ plugins: Plugin[] }>("GET", "/api/v1/plugins").then((r) => r.plugins),
    [],
  );
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
  return (
    <>
      <h1>Plugins</h1>
      <p class="error" role="alert">
        {failure ?? error ?? ""}
      </p>
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Kind</th>
            <th scope="col">Capabilities</th>
            <th scope="col">State</th>
            <th scope="col">Restarts</th>
            <th scope="col">Last start</th>
            {mayRestart && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {(value ?? []).map((p) => (
            <tr key={p.name} data-plugin={p.name}>
              <th scope="row">{p.name}</th>
              <td>{p.kind}</td>
              <td>
                {p.capabilities === null ? (
                  <span class="muted">{p.status === "start_failed" ? "unknown: its start failed" : "not started yet"}</span>
                ) : (
                  p.capabilities.join(", ") || "none"
                )}
              </td>
              <td data-status>
                {p.status?.replace(/_/g, " ") ?? (p.kind === "builtin" ? "in process" : "—")}
                {p.last_error && <p class="error">{p.last_error}</p>}
              </td>
              <td class="num">{p.restarts ?? "—"}</td>
              <td>
                <Time iso={p.last_start ?? p.capabilities_as_of ?? null} />
              </td>
              {mayRestart && (
                <td>
                  {p.kind === "external" && (
                    <button disabled={busy !== undefined} onClick={() => void restart(p)}>
                      {busy === p.name ? "Restarting…" : "Restart"}
                    </button>
                  )}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
