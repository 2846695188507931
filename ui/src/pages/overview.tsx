import { useEffect, useRef, useState } from "preact/hooks";
import type { Overview, OverviewCell, OverviewRow } from "../../../src/core/environments/overview.js";
import { ErrorNote, Status, Time } from "../components/common.js";
import { useEventStream, useLoad } from "../hooks.js";
import type { Session } from "../session.js";
import { historyHref } from "./deploys.js";

/** How long the page gathers events before it reads the overview again (a rollout sends several at once). */
const refreshDelayMs = 300;

/**
 * The home page: what runs where. One card per application's artifact, one cell per environment (in
 * the order they were first deployed to): the release live there, a deploy in progress and what it
 * waits for, a failed last deploy. Any event of a deploy the caller may read brings a fresh read.
 */
export function OverviewPage({ session }: { session: Session }) {
  const [generation, setGeneration] = useState(0);
  const { value: overview, error } = useLoad(() => session.api.call<Overview>("GET", "/api/v1/overview"), [generation]);
  const pending = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(pending.current), []);
  useEventStream(session.api, "/api/v1/events", () => {
    pending.current ??= setTimeout(() => {
      pending.current = undefined;
      setGeneration((g) => g + 1);
    }, refreshDelayMs);
  });
  return (
    <>
      <h1>Overview</h1>
      <ErrorNote message={error} />
      {overview?.rows.length === 0 && <p class="muted">Nothing deployed yet, or nothing you may read.</p>}
      <div class="overview" aria-live="polite">
        {(overview?.rows ?? []).map((row) => (
          <ApplicationCard key={`${row.tenant}/${row.application}/${row.artifact}`} row={row} />
        ))}
      </div>
    </>
  );
}

function ApplicationCard({ row }: { row: OverviewRow }) {
  const title = `${row.tenant}/${row.application}${row.artifact === row.application ? "" : ` (${row.artifact})`}`;
  const id = `app-${row.tenant}-${row.application}-${row.artifact}`;
  return (
    <section class="app-card" aria-labelledby={id} data-application={`${row.tenant}/${row.application}/${row.artifact}`}>
      <h2 id={id}>{title}</h2>
      <ul class="env-cells">
        {row.cells.map((cell) => (
          <li key={cell.environment} data-environment={cell.environment}>
            <Cell row={row} cell={cell} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function Cell({ row, cell }: { row: OverviewRow; cell: OverviewCell }) {
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
      <p class="cell-links">
        <a href={history}>History and rollback</a>
      </p>
    </>
  );
}
