import { useEffect, useState } from "preact/hooks";
import type { Overview, OverviewCell, OverviewPending, OverviewRow } from "../../../src/core/environments/overview.js";
import { can } from "../../../src/core/identity/policy.js";
import { ErrorNote, Status, Time } from "../components/common.js";
import { useCoalescedRead, useEventStream } from "../hooks.js";
import type { Session } from "../session.js";
import { historyHref } from "./deploys.js";

/** Events that change no cell: a step's or a target's progress, measurements (a deploy's page shows them). */
const unseen = new Set(["step.started", "step.succeeded", "step.failed", "step.skipped", "target.updated", "analysis.measured"]);

/**
 * The home page: what runs where. One card per application's artifact, one cell per environment (in
 * the order they were first deployed to): the release live there, a deploy in progress and what it
 * waits for, a failed last deploy, the releases waiting to come in (promoted or approved from the
 * cell). Events of the stream bring a fresh read, coalesced (one read for a burst, one at a time).
 */
export function OverviewPage({ session }: { session: Session }) {
  const [overview, setOverview] = useState<Overview>();
  const [error, setError] = useState<string>();
  const read = async (): Promise<void> => {
    try {
      setOverview(await session.api.call<Overview>("GET", "/api/v1/overview"));
      setError(undefined);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const refresh = useCoalescedRead(read);
  useEffect(() => void read(), []);
  useEventStream(session.api, "/api/v1/events", (e) => {
    if (!unseen.has(e.type)) refresh();
  });
  return (
    <>
      <h1>Overview</h1>
      <ErrorNote message={error} />
      {overview?.rows.length === 0 && <p class="muted">Nothing deployed yet, or nothing you may read.</p>}
      <div class="overview" aria-live="polite">
        {(overview?.rows ?? []).map((row) => (
          <ApplicationCard key={`${row.tenant}/${row.application}/${row.artifact}`} row={row} session={session} onChanged={refresh} />
        ))}
      </div>
    </>
  );
}

interface CellProps {
  row: OverviewRow;
  session: Session;
  onChanged: () => void;
}

function ApplicationCard({ row, session, onChanged }: Omit<CellProps, "cell">) {
  const title = `${row.tenant}/${row.application}${row.artifact === row.application ? "" : ` (${row.artifact})`}`;
  const id = `app-${row.tenant}-${row.application}-${row.artifact}`;
  return (
    <section class="app-card" aria-labelledby={id} data-application={`${row.tenant}/${row.application}/${row.artifact}`}>
      <h2 id={id}>{title}</h2>
      <ul class="env-cells">
        {row.cells.map((cell) => (
          <li key={cell.environment} data-environment={cell.environment}>
            <Cell row={row} cell={cell} session={session} onChanged={onChanged} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function Cell({ row, cell, session, onChanged }: CellProps & { cell: OverviewCell }) {
  const history = historyHref({ ...row, environment: cell.environment });
  const p = cell.in_progress;
  return (
    <>
      <h3>{cell.environment}</h3>
      {cell.live ? (
        <p class="live">
          <a href={`#/deploys/${cell.live.id}`} class="version">
            {cell.live.version}
          </a>
          {cell.live.kind === "rollback" && <span class="muted"> (a rollback)</span>}
          <br />
          <span class="muted">
            <Time iso={cell.live.finished_at} />
            {cell.live.by && ` by ${cell.live.by}`}
          </span>
        </p>
      ) : (
        <p class="muted">nothing live</p>
      )}
      {p ? (
        <p class="progress">
          <a href={`#/deploys/${p.id}`}>{p.version}</a> <Status status={p.status} />
          {p.rollout && <span> {p.rollout}</span>}
          {p.waiting && <span class="waiting-note">{p.waiting}</span>}
        </p>
      ) : (
        cell.last &&
        cell.last.status !== "succeeded" && (
          <p class="last">
            last: <a href={`#/deploys/${cell.last.id}`}>{cell.last.version}</a> <Status status={cell.last.status} />
          </p>
        )
      )}
      {cell.drift && cell.drift.state !== "in_sync" && (
        <p class={cell.drift.state === "drifted" || cell.drift.state === "error" ? "drift bad" : "drift muted"}>
          {cell.drift.state === "drifted"
            ? `Drifted: ${cell.drift.drifted} of ${cell.drift.targets} targets`
            : cell.drift.state === "error"
              ? "Drift check failed"
              : "Drift unknown"}
        </p>
      )}
      {cell.pending.map((w) => (
        <Pending key={w.release_id} row={row} environment={cell.environment} w={w} session={session} onChanged={onChanged} />
      ))}
      {cell.last && (
        <p class="cell-links">
          <a href={history}>History and rollback</a>
        </p>
      )}
    </>
  );
}

/**
 * A release waiting to come into this environment: what it waits for and since when, and the button
 * that moves it on (promote, approve) for a caller whose role allows it there. The server still
 * decides (an approval's approvers rules); its refusal is shown in the cell.
 */
function Pending({ row, environment, w, session, onChanged }: Omit<CellProps, "cell"> & { environment: string; w: OverviewPending }) {
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string>();
  const allowed = w.action !== null && can(session.me, w.action, { tenant: row.tenant, application: row.application, environment });
  const act = async (): Promise<void> => {
    const verb = w.action === "approve" ? "Approve" : "Promote";
    if (!confirm(`${verb} ${row.application} ${w.version} to ${environment}?`)) return;
    setBusy(true);
    setFailure(undefined);
    try {
      const path = `/api/v1/releases/${encodeURIComponent(w.release_id)}/${w.action!}`;
      await session.api.call("POST", path, w.action === "promote" ? { to: environment } : {});
      onChanged();
    } catch (err) {
      setFailure((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="pending" data-release={w.release_id}>
      <p>
        <a href={`#/releases/${encodeURIComponent(w.release_id)}`} class="version">
          {w.version}
        </a>{" "}
        {w.waiting_for === "soak" ? (
          <>
            next, after its soak in {w.from.join(", ")}
            {w.until && (
              <>
                {" "}
                (until <Time iso={w.until} />)
              </>
            )}
          </>
        ) : w.waiting_for === "analysis" ? (
          <>next, after its analysis in {w.from.join(", ")}</>
        ) : (
          <>
            waiting for {w.waiting_for}
            <span class="waiting-note muted">
              since <Time iso={w.since} />
            </span>
          </>
        )}
      </p>
      {allowed && (
        <button class="primary" disabled={busy} onClick={() => void act()}>
          {w.action === "approve" ? "Approve" : "Promote"} {w.version}
          <span class="sr-only"> to {environment}</span>
        </button>
      )}
      {failure && (
        <p class="error" role="alert">
          {failure}
        </p>
      )}
    </div>
  );
}
