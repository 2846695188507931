import { Time } from "../components/common.js";
import { useLoad } from "../hooks.js";
import type { Session } from "../main.js";

interface Plugin {
  name: string;
  kind: string;
  capabilities: string[] | null;
  capabilities_as_of?: string | null;
  status?: string;
  restarts?: number;
  last_start?: string | null;
}

export function PluginsPage({ session }: { session: Session }) {
  const { value, error } = useLoad(() => session.api.call<{ plugins: Plugin[] }>("GET", "/api/v1/plugins").then((r) => r.plugins), []);
  return (
    <>
      <h1>Plugins</h1>
      <p class="error" role="alert">
        {error ?? ""}
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
          </tr>
        </thead>
        <tbody>
          {(value ?? []).map((p) => (
            <tr key={p.name}>
              <th scope="row">{p.name}</th>
              <td>{p.kind}</td>
              <td>{p.capabilities === null ? <span class="muted">not started yet</span> : p.capabilities.join(", ") || "none"}</td>
              <td>{p.status ?? (p.kind === "builtin" ? "in process" : "—")}</td>
              <td class="num">{p.restarts ?? "—"}</td>
              <td>
                <Time iso={p.last_start ?? p.capabilities_as_of ?? null} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
