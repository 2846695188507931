import { useState } from "preact/hooks";
import { applyEvent, type DeployEvent, type DeployView } from "../../../src/core/engine/deploy-events.js";
import { terminalStatuses, type DeployRecord } from "../../../src/core/engine/deploy-store.js";
import type { ApprovalRecord, WaitingState } from "../../../src/core/rollout/rollout-state.js";
import { can } from "../../../src/core/identity/policy.js";
import { envconfigOrigin } from "../../../src/cli/envconfig-origin.js";
import { Approvals } from "../components/approvals.js";
import { Duration, shortId, Status, Time } from "../components/common.js";
import { ScrollBox } from "../components/data-table.js";
import { navigate, useEventStream, useLoad } from "../hooks.js";
import type { Session } from "../session.js";
import { historyHref } from "./deploys.js";

interface Attempt {
  attempt: number;
  started: string;
  status: string;
  duration_ms: number | null;
  error: string | null;
}

/** One deploy: header, actions, rollout picture, steps with every attempt, targets; all live from its event stream. */
export function DeployPage({ session, id }: { session: Session; id: string }) {
  const { value: record, error } = useLoad(() => session.api.call<DeployRecord>("GET", `/api/v1/deploys/${id}`), [id]);
  const [view, setView] = useState<DeployView>();
  const [events, setEvents] = useState<DeployEvent[]>([]);
  const [actionError, setActionError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEventStream(
    session.api,
    record ? `/api/v1/deploys/${id}/events` : null,
    (e) => {
      setEvents((prev) => (prev.some((x) => x.id === e.id) ? prev : [...prev, e]));
      setView((prev) => applyEvent(prev ?? { ...record!, steps: [], targets: [] }, e));
    },
    { after: 0 },
    [id, record !== undefined],
  );
  if (error)
    return (
      <p class="error" role="alert">
        {error}
      </p>
    );
  if (!record) return <p aria-busy="true">Loading…</p>;
  const d = (view ?? record) as DeployView & { rollout?: Rollout | null };
  const rollout = d.rollout ?? null;
  const running = !terminalStatuses.has(d.status);

  const act = async (label: string, path: string, body: unknown = {}, confirmText?: string): Promise<void> => {
    if (confirmText && !confirm(confirmText)) return;
    setBusy(true);
    setActionError(undefined);
    try {
      const out = await session.api.call<{ id?: string }>("POST", path, body);
      if ((label === "rollback" || label === "retry") && out.id) navigate("deploys", out.id);
    } catch (err) {
      setActionError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const rollback = async (): Promise<void> => {
    const descriptor = (record.request as { descriptor?: unknown }).descriptor;
    await act(
      "rollback",
      "/api/v1/rollbacks",
      { descriptor, descriptor_file: "web UI" },
      `Roll ${d.application} in ${d.environment} back to the release before ${d.version}?`,
    );
  };

  // An admin starts a deploy held back by a deploy window now, saying why (kept in the audit log).
  const overridable = can(session.me, "window_override", { tenant: d.tenant, application: d.application, environment: d.environment });
  const overrideWindow = async (): Promise<void> => {
    const reason = prompt("Start this deploy now, outside its deploy window? Say why (kept in the audit log):");
    if (reason === null) return;
    await act("override", `/api/v1/deploys/${id}/window-override`, { reason });
  };

  // What retry.ts retries: a deploy that ended without its release in place; shown to who may submit it again.
  // A release's deploy is retried with its release (retry.ts refuses it alone): the release's page has the button.
  const ofRelease = (record.request as { release?: { id: string; stage: number } }).release;
  const retryable =
    d.kind === "deploy" &&
    !ofRelease &&
    ["failed", "rolled_back", "cancelled"].includes(d.status) &&
    can(session.me, "submit", { tenant: d.tenant, application: d.application, environment: d.environment });

  return (
    <>
      <h1>
        {d.kind === "rollback" ? "Rollback" : d.kind === "dry_run" ? "Dry-run" : "Deploy"} of <a href={historyHref(d)}>{d.application}</a>{" "}
        <span class="num">{d.version}</span> → {d.environment}
      </h1>
      <dl class="facts">
        <div>
          <dt>Status</dt>
          <dd aria-live="polite" id="deploy-status">
            <Status status={d.status} />
          </dd>
        </div>
        <div>
          <dt>Tenant</dt>
          <dd>{d.tenant}</dd>
        </div>
        <div>
          <dt>By</dt>
          <dd>{d.submitted_by ?? "—"}</dd>
        </div>
        {ofRelease && (
          <div>
            <dt>Release</dt>
            <dd>
              <a href={`#/releases/${ofRelease.id}`} class="num">
                {shortId(ofRelease.id)}
              </a>{" "}
              stage {ofRelease.stage}
            </dd>
          </div>
        )}
        {d.envconfig && (
          <div>
            <dt>Envconfig</dt>
            <dd class="num" title={`sha256 ${d.envconfig.sha256}`}>
              {envconfigOrigin(d.envconfig)}
            </dd>
          </div>
        )}
        {d.retry_of && (
          <div>
            <dt>Retry of</dt>
            <dd>
              <a href={`#/deploys/${d.retry_of}`} class="num">
                {shortId(d.retry_of)}
              </a>
            </dd>
          </div>
        )}
        {d.retried_by.length > 0 && (
          <div>
            <dt>Retried by</dt>
            <dd>
              {d.retried_by.map((r, i) => (
                <span key={r}>
                  {i > 0 && ", "}
                  <a href={`#/deploys/${r}`} class="num">
                    {shortId(r)}
                  </a>
                </span>
              ))}
            </dd>
          </div>
        )}
        <div>
          <dt>Plugin</dt>
          <dd>{d.plugin ?? "—"}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>
            <Time iso={d.created_at} />
          </dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>
            <Time iso={d.finished_at} />
          </dd>
        </div>
      </dl>
      <p class="error" role="alert">
        {d.error ? d.error.message : ""}
      </p>
      {d.status === "queued" && d.waiting && (
        <p class="waiting" role="status" id="deploy-waiting">
          {d.waiting.hint}, since <Time iso={d.waiting.since} />
        </p>
      )}
      <div class="actions" role="group" aria-label="actions">
        {running && (
          <button disabled={busy} onClick={() => void act("cancel", `/api/v1/deploys/${id}/cancel`, {}, "Cancel this deploy?")}>
            Cancel
          </button>
        )}
        {d.status === "queued" && d.waiting && overridable && (
          <button disabled={busy} onClick={() => void overrideWindow()}>
            Override window
          </button>
        )}
        {running && rollout?.waiting?.kind === "approval" && (
          <button class="primary" disabled={busy} onClick={() => void act("approve", `/api/v1/deploys/${id}/approve`)}>
            Approve
          </button>
        )}
        {running && rollout?.waiting && (
          <button disabled={busy} onClick={() => void act("promote", `/api/v1/deploys/${id}/promote`, { full: false })}>
            Promote
          </button>
        )}
        {running && rollout && (
          <button
            disabled={busy}
            onClick={() =>
              void act(
                "promote",
                `/api/v1/deploys/${id}/promote`,
                { full: true },
                "Promote fully: skip every remaining step and gate and promote now? (An approval that names its approvers still waits for them.)",
              )
            }
          >
            Promote fully
          </button>
        )}
        {running && rollout && (
          <button
            class="danger"
            disabled={busy}
            onClick={() => void act("abort", `/api/v1/deploys/${id}/abort`, {}, "Abort the rollout and revert?")}
          >
            Abort
          </button>
        )}
        {!running && retryable && (
          <button
            class="primary"
            disabled={busy}
            onClick={() =>
              void act(
                "retry",
                `/api/v1/deploys/${id}/retry`,
                {},
                `Retry the deploy of ${d.application} ${d.version} to ${d.environment}, with the same artifact and settings?`,
              )
            }
          >
            Retry
          </button>
        )}
        {!running && d.kind === "deploy" && d.status === "succeeded" && (
          <button disabled={busy} onClick={() => void rollback()}>
            Roll back
          </button>
        )}
        <span class="error" role="alert">
          {actionError ?? ""}
        </span>
      </div>
      {rollout && <RolloutPicture rollout={rollout} events={events} />}
      <section aria-labelledby="steps-h">
        <h2 id="steps-h">Steps</h2>
        <ol class="timeline">
          {d.steps.map((s) => (
            <li key={s.name} data-step={s.name}>
              <div class="step-head">
                <strong>{s.name}</strong> <Status status={s.status} /> <Duration ms={s.duration_ms} />
              </div>
              <ol class="attempts">
                {attemptsOf(events, s.name).map((a) => (
                  <li key={a.attempt}>
                    attempt {a.attempt}: <Status status={a.status} /> <Time iso={a.started} /> <Duration ms={a.duration_ms} />
                    {a.error && <span class="error"> — {a.error}</span>}
                  </li>
                ))}
              </ol>
            </li>
          ))}
        </ol>
      </section>
      <section aria-labelledby="targets-h">
        <h2 id="targets-h">Targets</h2>
        <TargetGrid d={d} />
      </section>
    </>
  );
}

function attemptsOf(events: DeployEvent[], step: string): Attempt[] {
  const out: Attempt[] = [];
  for (const e of events) {
    if (!e.type.startsWith("step.") || e.data.name !== step) continue;
    const n = (e.data.attempt as number | undefined) ?? out.length + 1;
    if (e.type === "step.started") out.push({ attempt: n, started: e.at, status: "running", duration_ms: null, error: null });
    else {
      const a = out.find((x) => x.attempt === n) ?? out[out.length - 1];
      if (!a) continue;
      a.status = e.type.slice(5);
      a.duration_ms = Date.parse(e.at) - Date.parse(a.started);
      a.error = (e.data.error as { message?: string } | null)?.message ?? null;
    }
  }
  return out;
}

/** The phases that change what a target runs, last first: its state now is the latest of them it has. */
const outcomePhases = ["rollback", "revert_candidate", "deploy"];

/** A target's status in a phase, in words: a candidate taken away by an abort reads `reverted`. */
function TargetStatus({ phase, status }: { phase: string; status: string }) {
  return <Status status={status} label={phase === "revert_candidate" && status === "rolled_back" ? "reverted" : undefined} />;
}

/** Targets by phase; a target's error is written in its cell (read without a mouse, by a screen reader too). */
function TargetGrid({ d }: { d: DeployView }) {
  const phases = [...new Set(d.targets.map((t) => t.phase))];
  const hosts = [...new Set(d.targets.map((t) => t.host))].sort();
  if (hosts.length === 0) return <p class="muted">No target has reported yet.</p>;
  const now = (h: string) => outcomePhases.map((p) => d.targets.find((x) => x.host === h && x.phase === p)).find((t) => t !== undefined);
  const withNow = phases.length > 1 && phases.some((p) => outcomePhases.includes(p));
  return (
    <ScrollBox label="targets by phase">
      <table class="grid">
        <thead>
          <tr>
            <th scope="col">Target</th>
            {withNow && <th scope="col">Now</th>}
            {phases.map((p) => (
              <th scope="col">{p}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {hosts.map((h) => {
            const last = now(h);
            return (
              <tr key={h} data-target={h}>
                <th scope="row">{h}</th>
                {withNow && (
                  <td data-now>{last ? <TargetStatus phase={last.phase} status={last.status} /> : <span class="muted">—</span>}</td>
                )}
                {phases.map((p) => {
                  const t = d.targets.find((x) => x.host === h && x.phase === p);
                  return (
                    <td data-phase={p}>
                      {t ? (
                        <>
                          <TargetStatus phase={p} status={t.status} /> <Duration ms={t.duration_ms} />
                          {t.error && <p class="target-error">{t.error}</p>}
                        </>
                      ) : (
                        <span class="muted">—</span>
                      )}
                    </td>
                  );
                })}
              </tr>
            );
          })}
        </tbody>
      </table>
    </ScrollBox>
  );
}

interface Rollout {
  waves: { index: number; name: string; hosts: string[]; status: string }[];
  current_wave: number | null;
  canary: { steps: string[]; step: number; phase: string; weight: number } | null;
  waiting: WaitingState | null;
  approvals?: ApprovalRecord[];
  measurements: { step: string; check: string; at: string; value: number | string | null; verdict: string; message: string }[];
  message: string | null;
}

/** Waves as boxes, the canary's weight over time (from its events), the analysis measurements. */
function RolloutPicture({ rollout, events }: { rollout: Rollout; events: DeployEvent[] }) {
  const weights = events
    .filter((e) => e.type === "canary.moved")
    .map((e) => ({ at: Date.parse(e.at), weight: (e.data.canary as { weight?: number } | null)?.weight ?? 0 }));
  return (
    <section aria-labelledby="rollout-h">
      <h2 id="rollout-h">Rollout</h2>
      {rollout.waiting && (
        <p class="waiting" role="status">
          Waiting ({rollout.waiting.kind}) at {rollout.waiting.step}: {rollout.waiting.hint}
        </p>
      )}
      <Approvals approvals={rollout.approvals} waiting={rollout.waiting} />
      {rollout.waves.length > 0 && (
        <ol class="waves" aria-label="waves">
          {rollout.waves.map((w) => (
            <li class={w.index === rollout.current_wave ? "current" : ""}>
              <strong>Wave {w.index}</strong> {w.name} <Status status={w.status} />
              <div class="muted">{w.hosts.join(", ")}</div>
            </li>
          ))}
        </ol>
      )}
      {rollout.canary && (
        <div class="canary">
          <p>
            Canary: <strong>{rollout.canary.weight}%</strong> to the candidate · {rollout.canary.phase.replace(/_/g, " ")} · step{" "}
            {Math.min(rollout.canary.step, rollout.canary.steps.length)} of {rollout.canary.steps.length}
          </p>
          <WeightChart points={weights} />
          <ol class="canary-steps">
            {rollout.canary.steps.map((s, i) => (
              <li class={i + 1 === rollout.canary!.step ? "current" : i + 1 < rollout.canary!.step ? "done" : ""}>{s}</li>
            ))}
          </ol>
        </div>
      )}
      {rollout.measurements.length > 0 && (
        <ScrollBox label="analysis measurements">
          <table class="measurements">
            <caption>Analysis</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Step</th>
                <th scope="col">Check</th>
                <th scope="col">Value</th>
                <th scope="col">Verdict</th>
                <th scope="col">Against</th>
              </tr>
            </thead>
            <tbody>
              {rollout.measurements.map((m) => (
                <tr>
                  <td>
                    <Time iso={m.at} />
                  </td>
                  <td>{m.step}</td>
                  <td>{m.check}</td>
                  <td class="num">{m.value ?? "—"}</td>
                  <td>
                    <Status status={m.verdict === "successful" ? "succeeded" : m.verdict === "failed" ? "failed" : "skipped"} />
                  </td>
                  <td>{m.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollBox>
      )}
      {rollout.message && <p class="error">{rollout.message}</p>}
    </section>
  );
}

function WeightChart({ points }: { points: { at: number; weight: number }[] }) {
  const w = 480;
  const h = 120;
  if (points.length === 0)
    return <svg class="chart" viewBox={`0 0 ${w} ${h}`} role="img" aria-label="candidate weight over time: no data yet" />;
  const t0 = points[0]!.at;
  const t1 = Math.max(points[points.length - 1]!.at, t0 + 1);
  const x = (t: number) => 30 + ((t - t0) / (t1 - t0)) * (w - 40);
  const y = (v: number) => h - 20 - (v / 100) * (h - 30);
  let path = "";
  points.forEach((p, i) => {
    path += i === 0 ? `M${x(p.at)},${y(p.weight)}` : `H${x(p.at)}V${y(p.weight)}`;
  });
  return (
    <svg
      class="chart"
      viewBox={`0 0 ${w} ${h}`}
      role="img"
      aria-label={`candidate weight over time: ${points.map((p) => `${p.weight}%`).join(", ")}`}
    >
      <line x1="30" y1={y(0)} x2={w - 10} y2={y(0)} class="axis" />
      <line x1="30" y1={y(100)} x2={w - 10} y2={y(100)} class="axis" />
      <text x="2" y={y(100) + 4}>
        100%
      </text>
      <text x="12" y={y(0) + 4}>
        0%
      </text>
      <path d={path} class="weight" />
    </svg>
  );
}
