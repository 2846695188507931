import type { ErrorJSON } from "../errors.js";
import { terminalStatuses, type DeployRecord, type DeployStatus, type DeployWaiting, type StepStatus } from "./deploy-store.js";

/**
 * A change of a deploy, as the event streams carry it (`GET /api/v1/deploys/{id}/events`,
 * `GET /api/v1/events`). `id` is a durable, increasing sequence: a client that reconnects with
 * `Last-Event-ID: <id>` gets every later event.
 *
 * Its `type` is one of {@link deployEventTypes}.
 */
export interface DeployEvent {
  id: number;
  at: string;
  tenant: string;
  deploy_id: string | null;
  /** Set on a release's own events (`release.created`, `release.status`, `release.updated`). */
  release_id?: string;
  type: string;
  data: Record<string, unknown>;
}

/**
 * Every event type and the keys of its `data`: what `docs/reference/events.md` lists (generated
 * from this), and what the triggers of src/storage/events-schema.ts write (a test compares them).
 */
export const deployEventTypes = {
  "deploy.created": {
    about: "A deploy, rollback or dry-run was recorded: the deploy as `GET /api/v1/deploys/{id}` shows it, without steps and targets",
    data: [
      "id",
      "kind",
      "tenant",
      "application",
      "artifact",
      "environment",
      "version",
      "plugin",
      "status",
      "error",
      "submitted_by",
      "submitted_by_id",
      "retry_of",
      "envconfig",
      "created_at",
      "started_at",
      "finished_at",
    ],
  },
  "deploy.status": {
    about: "The deploy's status, error or plugin changed; a terminal `status` (succeeded, failed, rolled_back, cancelled) is its end",
    data: ["status", "error", "plugin", "started_at", "finished_at"],
  },
  "deploy.waiting": {
    about: "A queued deploy waits for its deploy window (`waiting`: kind, since, until, rule, hint), or no longer does (`waiting` null)",
    data: ["waiting"],
  },
  "step.started": {
    about: "An attempt of a step began (`attempt` counts from 1; a retry is a new attempt)",
    data: ["name", "seq", "attempt", "started_at"],
  },
  "step.succeeded": { about: "The step's attempt succeeded", data: ["name", "seq", "attempt", "duration_ms", "error"] },
  "step.failed": {
    about: "The step's attempt failed with `error`; a retry starts it again with a new `step.started`",
    data: ["name", "seq", "attempt", "duration_ms", "error"],
  },
  "step.skipped": {
    about: "The step did not run (nothing to do, or the deploy ended first)",
    data: ["name", "seq", "attempt", "duration_ms", "error"],
  },
  "target.updated": {
    about:
      "A target's result in a phase (`deploy`, `rollback`, …) changed (`status` deployed, failed, skipped, unchanged, rolled_back and others; `error` its message)",
    data: ["phase", "host", "status", "duration_ms", "error", "details"],
  },
  "wave.moved": { about: "A rollout in waves moved to another wave, or a wave's state changed", data: ["current_wave", "waves"] },
  "canary.moved": { about: "A canary's step, weight or phase changed", data: ["canary"] },
  "analysis.measured": { about: "Analysis checks took new measurements (only the new ones)", data: ["measurements"] },
  "gate.waiting": {
    about: "The rollout waits: a pause or an approval (`waiting`), `previous` the wait before it if any",
    data: ["waiting", "previous"],
  },
  "gate.passed": { about: "The rollout no longer waits (`waiting` null, `previous` the wait that ended)", data: ["waiting", "previous"] },
  "gate.approved": {
    about: "Someone approved (`manent approve`): the command as recorded",
    data: ["seq", "command", "full_promote", "sent_by", "sent_at", "during"],
  },
  "canary.promoted": {
    about: "Someone promoted (`manent promote`, `full_promote` for --full): the command as recorded",
    data: ["seq", "command", "full_promote", "sent_by", "sent_at", "during"],
  },
  "rollout.aborted": {
    about: "Someone aborted the rollout (`manent abort`): the command as recorded",
    data: ["seq", "command", "full_promote", "sent_by", "sent_at", "during"],
  },
  "rollout.updated": {
    about: "The whole rollout state after any change of it (sent after the more specific events above)",
    data: ["rollout"],
  },
  "drift.changed": {
    about:
      "A drift check (src/core/drift) found targets whose state (in_sync, drifted, unknown, error) or changes differ from the last check, under the deploy it compared with: `targets` are those targets' records",
    data: ["tenant", "application", "artifact", "environment", "targets"],
  },
  "notification.delivered": {
    about:
      "A notification (docs/operations/notifications.md) reached its channel: the channel's name and type, the event notified, after how many attempts; under the deploy or release it is about",
    data: ["channel", "channel_type", "event", "attempts"],
  },
  "notification.failed": {
    about:
      "A notification was given up: its channel refused it (a 4xx answer, a refused address) or every attempt failed; `error` says why (never the channel's URL)",
    data: ["channel", "channel_type", "event", "attempts", "error"],
  },
  "release.created": {
    about:
      "A release was started (`manent release start`, or `manent release retry`: then `retry_of` names the release it retries, null otherwise); `release_id` is set on the release's events, `deploy_id` is null",
    data: [
      "id",
      "tenant",
      "application",
      "artifact",
      "version",
      "sha256",
      "status",
      "environments",
      "submitted_by",
      "retry_of",
      "created_at",
    ],
  },
  "release.status": {
    about: "The release's status or error changed; a terminal `status` (succeeded, failed, cancelled) is its end",
    data: ["status", "error", "finished_at"],
  },
  "release.updated": {
    about: "The release moved: its stages (deploys, soak, approvals, measurements), what it waits for, the pinned sha256",
    data: ["current_stage", "stages", "waiting", "sha256"],
  },
} as const satisfies Record<string, { about: string; data: readonly string[] }>;

export type DeployEventType = keyof typeof deployEventTypes;

/** The deploy a stream of events describes, without what only the full record has (request, step output). */
export type DeployView = Omit<DeployRecord, "request"> & { request?: Record<string, unknown> };

/** The types of the events {@link isFinishEvent} may answer true for: what a subscriber waiting for ends needs read. */
export const finishEventTypes: readonly DeployEventType[] = ["deploy.status"];

/** True when the event says the deploy has ended. */
export function isFinishEvent(e: DeployEvent): boolean {
  return e.type === "deploy.status" && terminalStatuses.has(e.data.status as DeployStatus);
}

/**
 * Applies one event to a deploy's picture; events carry absolute states, so applying one twice
 * changes nothing. `deploy.created` starts the picture; other events before it are ignored.
 */
export function applyEvent(d: DeployView | undefined, e: DeployEvent): DeployView | undefined {
  const data = e.data;
  if (e.type === "deploy.created")
    // The retries of a deploy come after it was created: a picture built from events starts with none.
    return (
      d ?? {
        ...(data as unknown as DeployView),
        retry_of: (data.retry_of as string | null | undefined) ?? null,
        envconfig: (data.envconfig as DeployView["envconfig"] | undefined) ?? null,
        retried_by: [],
        steps: [],
        targets: [],
      }
    );
  if (!d) return d;
  switch (e.type) {
    case "deploy.status":
      return {
        ...d,
        status: data.status as DeployStatus,
        error: (data.error as ErrorJSON | null) ?? null,
        plugin: (data.plugin as string | null) ?? d.plugin,
        started_at: (data.started_at as string | null) ?? d.started_at,
        finished_at: (data.finished_at as string | null) ?? d.finished_at,
      };
    case "step.started":
    case "step.succeeded":
    case "step.failed":
    case "step.skipped": {
      const name = data.name as string;
      const status = e.type.slice("step.".length) === "started" ? "running" : (e.type.slice("step.".length) as StepStatus);
      const prev = d.steps.find((s) => s.name === name);
      const step = {
        name,
        status,
        attempts: (data.attempt as number | undefined) ?? prev?.attempts ?? 1,
        started_at: (data.started_at as string | null | undefined) ?? prev?.started_at ?? e.at,
        duration_ms: status === "running" ? null : ((data.duration_ms as number | null | undefined) ?? null),
        output: prev?.output ?? null,
        error: status === "running" ? null : ((data.error as ErrorJSON | null | undefined) ?? null),
      };
      const steps = prev ? d.steps.map((s) => (s.name === name ? step : s)) : [...d.steps, step];
      return { ...d, steps };
    }
    case "target.updated": {
      const t = {
        phase: data.phase as string,
        host: data.host as string,
        status: data.status as string,
        duration_ms: (data.duration_ms as number | null) ?? null,
        error: (data.error as string | null) ?? null,
        details: (data.details as Record<string, string> | null) ?? null,
      };
      const targets = [...d.targets.filter((x) => x.phase !== t.phase || x.host !== t.host), t];
      // In the order the API lists them (phase, host), so a picture built from events reads like one fetched.
      targets.sort((a, b) => (a.phase === b.phase ? (a.host < b.host ? -1 : a.host > b.host ? 1 : 0) : a.phase < b.phase ? -1 : 1));
      return { ...d, targets };
    }
    case "deploy.waiting":
      return { ...d, waiting: (data.waiting as DeployWaiting | null) ?? null };
    case "rollout.updated": {
      // The state as the workflow wrote it; operator commands live beside it, as the API lists them.
      const prev = (d as { rollout?: { commands?: unknown[] } | null }).rollout;
      return { ...d, ...({ rollout: { commands: prev?.commands ?? [], ...(data.rollout as object) } } as object) };
    }
    default:
      return d;
  }
}
