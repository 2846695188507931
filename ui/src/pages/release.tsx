import { useEffect, useState } from "preact/hooks";
import type { ReleaseRecord, StageState } from "../../../src/core/release/release-store.js";
import { can } from "../../../src/core/identity/policy.js";
import { shortId, Status, Time } from "../components/common.js";
import { navigate, useEventStream, useLoad } from "../hooks.js";
import type { Session } from "../session.js";
import { historyHref } from "./deploys.js";
import { releasePosition } from "./releases.js";

const stageClass: Record<StageState["status"], string> = {
  pending: "pending",
  not_started: "skipped",
  waiting: "running",
  deploying: "running",
  soaking: "running",
  analysing: "running",
  succeeded: "succeeded",
  failed: "failed",
  cancelled: "cancelled",
};

/** Ticks once a second while `on` (a soak's remaining time); no timer otherwise. */
function useNow(on: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [on]);
  return now;
}

function remaining(untilIso: string, now: number): string {
  const s = Math.max(0, Math.ceil((Date.parse(untilIso) - now) / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
}

/**
 * One release: its path through the environments, each stage's deploys (linked), status, soak with
 * its remaining time, analysis, approvals (who approved); cancel, approve and promote for a caller
 * whose role allows them where the release stands, and retry of one that failed or was cancelled
 * (with the releases it retries or was retried by). Live from the release's event stream.
 */
export function ReleasePage({ session, id }: { session: Session; id: string }) {
  const { value: loaded, error } = useLoad(
    () => session.api.call<ReleaseRecord>("GET", `/api/v1/releases/${encodeURIComponent(id)}`),
    [id],
  );
  const [live, setLive] = useState<ReleaseRecord>();
  const [actionError, setActionError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEventStream(
    session.api,
    loaded ? `/api/v1/releases/${encodeURIComponent(id)}/events` : null,
    (e) => {
      if (e.type === "release.updated" || e.type === "release.status")
        setLive((prev) => ({ ...(prev ?? loaded!), ...(e.data as Partial<ReleaseRecord>) }));
    },
    { after: 0 },
    [id, loaded !== undefined],
  );
  const r = live ?? loaded;
  const soaking = r?.waiting?.kind === "soak";
  const now = useNow(soaking);
  if (error)
    return (
      <p class="error" role="alert">
        {error}
      </p>
    );
  if (!r) return <p aria-busy="true">Loading…</p>;
  const running = r.status === "running";
  const w = r.waiting;
  const scope = (environment: string) => ({ tenant: r.tenant, application: r.application, environment });
  const here = w?.environments ?? r.stages[(r.current_stage ?? 1) - 1]?.environments ?? [];
  const mayAll = (action: "cancel" | "approve" | "promote", envs: string[]) =>
    envs.length > 0 && envs.every((e) => can(session.me, action, scope(e)));

  const act = async (path: string, body: unknown, question: string): Promise<void> => {
    if (!confirm(question)) return;
    setBusy(true);
    setActionError(undefined);
    try {
      const out = await session.api.call<ReleaseRecord>("POST", `/api/v1/releases/${encodeURIComponent(r.id)}/${path}`, body);
      setLive(out);
    } catch (err) {
      setActionError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  // What releases.ts retries: a release that ended failed or cancelled, for who may start it (submit in every environment).
  const restartAt = r.stages.find((s) => s.status !== "succeeded");
  const retryable =
    (r.status === "failed" || r.status === "cancelled") &&
    restartAt !== undefined &&
    r.environments.every((e) => can(session.me, "submit", scope(e)));
  const retry = async (): Promise<void> => {
    const passed = r.stages.filter((s) => s.index < restartAt!.index).flatMap((s) => s.environments);
    const question =
      `Retry the release of ${r.application} ${r.version}, with the same artifact? ` +
      `It restarts from ${restartAt!.environments.join(", ")} (stage ${restartAt!.index})` +
      (passed.length ? `; ${passed.join(", ")} ${passed.length > 1 ? "are" : "is"} not deployed again.` : ".");
    if (!confirm(question)) return;
    setBusy(true);
    setActionError(undefined);
    try {
      const out = await session.api.call<{ id: string }>("POST", `/api/v1/releases/${encodeURIComponent(r.id)}/retry`, {});
      navigate("releases", out.id);
    } catch (err) {
      setActionError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <h1>
        Release of {r.application} <span class="num">{r.version}</span>
      </h1>
      <dl class="facts">
        <div>
          <dt>Status</dt>
          <dd aria-live="polite" id="release-status">
            <Status status={r.status} /> <span class="muted">{releasePosition(r)}</span>
          </dd>
        </div>
        <div>
          <dt>Tenant</dt>
          <dd>{r.tenant}</dd>
        </div>
        <div>
          <dt>By</dt>
          <dd>{r.submitted_by ?? "—"}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>
            <Time iso={r.created_at} />
          </dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>
            <Time iso={r.finished_at} />
          </dd>
        </div>
        <div>
          <dt>sha256</dt>
          <dd class="hash">{r.sha256 ?? "—"}</dd>
        </div>
        {r.retry_of && (
          <div>
            <dt>Retry of</dt>
            <dd>
              <a href={`#/releases/${r.retry_of}`} class="num">
                {shortId(r.retry_of)}
              </a>
            </dd>
          </div>
        )}
        {(r.retried_by ?? []).length > 0 && (
          <div>
            <dt>Retried by</dt>
            <dd>
              {r.retried_by.map((x, i) => (
                <span key={x}>
                  {i > 0 && ", "}
                  <a href={`#/releases/${x}`} class="num">
                    {shortId(x)}
                  </a>
                </span>
              ))}
            </dd>
          </div>
        )}
      </dl>
      {w && (
        <p class="waiting-note" role="status">
          {w.hint}
          {w.kind === "soak" && w.until && <> ({remaining(w.until, now)} left)</>}
        </p>
      )}
      <p class="error" role="alert">
        {r.error ? r.error.message : ""}
      </p>
      <div class="actions" role="group" aria-label="actions">
        {running &&
          w?.kind === "promotion" &&
          w.environments
            .filter((e) => can(session.me, "promote", scope(e)))
            .map((e) => (
              <button
                key={e}
                class="primary"
                disabled={busy}
                onClick={() => void act("promote", { to: e }, `Promote ${r.application} ${r.version} to ${e}?`)}
              >
                Promote to {e}
              </button>
            ))}
        {running && w?.kind === "approval" && mayAll("approve", w.environments) && (
          <button
            class="primary"
            disabled={busy}
            onClick={() => void act("approve", {}, `Approve ${r.application} ${r.version} for ${w.environments.join(", ")}?`)}
          >
            Approve for {w.environments.join(", ")}
          </button>
        )}
        {running && mayAll("cancel", here) && (
          <button
            class="danger"
            disabled={busy}
            onClick={() =>
              void act("cancel", {}, `Cancel the release of ${r.application} ${r.version}? Later environments will not be deployed.`)
            }
          >
            Cancel release
          </button>
        )}
        {retryable && (
          <button class="primary" disabled={busy} onClick={() => void retry()}>
            Retry from {restartAt.environments.join(", ")}
          </button>
        )}
        <span class="error" role="alert">
          {actionError ?? ""}
        </span>
      </div>
      <h2 id="path">Path through the environments</h2>
      <ol class="release-path" aria-labelledby="path">
        {r.stages.map((s) => (
          <li key={s.index} data-stage={s.index} class={`stage stage-${stageClass[s.status]}`}>
            <Stage r={r} s={s} now={now} />
          </li>
        ))}
      </ol>
    </>
  );
}

function Stage({ r, s, now }: { r: ReleaseRecord; s: StageState; now: number }) {
  const pipeline = r.pipeline.stages[s.index - 1];
  const given = s.approvals;
  return (
    <>
      <h3>
        {s.index}. {s.environments.join(", ")} <Status status={stageClass[s.status]} label={s.status.replace(/_/g, " ")} />
      </h3>
      {s.done_by && (
        <p class="muted">
          Done by release{" "}
          <a href={`#/releases/${s.done_by}`} class="num">
            {shortId(s.done_by)}
          </a>
          : not deployed again by this retry
        </p>
      )}
      {pipeline?.promotion === "manual" && (
        <p>
          Manual promotion:{" "}
          {s.promoted_by ? (
            <>
              promoted by {s.promoted_by} <Time iso={s.promoted_at} />
            </>
          ) : (
            <span class="muted">not yet</span>
          )}
        </p>
      )}
      {pipeline?.approval && (
        <div class="approvals">
          <p>
            Approval: {given.length} of {pipeline.approval.approvers?.count ?? 1}
            {pipeline.approval.approvers?.from_groups?.length ? ` from ${pipeline.approval.approvers.from_groups.join(" or ")}` : ""}
            {pipeline.approval.approvers?.allow_submitter === false ? "; the submitter may not approve" : ""}
          </p>
          {given.length > 0 && (
            <ul>
              {given.map((a) => (
                <li key={a.by_id}>
                  approved by <span title={a.by_id}>{a.by}</span> <Time iso={a.at} />
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {s.deploys.length > 0 && (
        <ul class="stage-deploys">
          {s.deploys.map((d) => (
            <li key={d.deploy_id}>
              <a href={`#/deploys/${d.deploy_id}`}>Deploy to {d.environment}</a> <Status status={d.status} />{" "}
              <a href={historyHref({ tenant: r.tenant, application: r.application, artifact: r.artifact, environment: d.environment })}>
                history
              </a>
            </li>
          ))}
        </ul>
      )}
      {s.soak_until && (
        <p>
          Soak until <Time iso={s.soak_until} />
          {s.status === "soaking" && <strong> ({remaining(s.soak_until, now)} left)</strong>}
        </p>
      )}
      {pipeline?.analysis && (
        <p>
          Analysis {pipeline.analysis.checks.join(", ")}:{" "}
          {s.measurements.length === 0 ? (
            <span class="muted">no measurement yet</span>
          ) : (
            `${s.measurements.filter((m) => m.verdict === "successful").length} of ${s.measurements.length} measurements successful`
          )}
        </p>
      )}
      {s.message && <p class="error">{s.message}</p>}
    </>
  );
}
