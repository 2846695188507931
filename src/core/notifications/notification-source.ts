import type { NotificationEvent } from "../config/notifications-config.js";

/** What a notification says: the facts of one event of a deploy or a release, as templates see them. */
export interface NotificationFacts {
  event: NotificationEvent;
  /** A deploy (a rollback included) or a release. */
  of: "deploy" | "release";
  /** The deploy's or the release's id. */
  id: string;
  /** deploy, rollback (a deploy's kind), or release. */
  kind: string;
  tenant: string;
  application: string;
  artifact: string;
  /** A release's environments, comma-separated. */
  environment: string;
  version: string;
  status: string;
  /** The error's message when it failed. */
  error: string | null;
  /** What it waits for and how to go on (`waiting`). */
  hint: string | null;
  /** The targets found drifted (`drifted`). */
  drifted: string[];
  /** When the event happened (ISO 8601). */
  at: string;
}

/** One event of the event log, with the deploy or release it belongs to (read by the store). */
export interface SourceEvent {
  id: number;
  at: string;
  tenant: string;
  type: string;
  data: Record<string, unknown>;
  deploy: { id: string; kind: string; application: string; artifact: string; environment: string; version: string } | null;
  release: { id: string; application: string; artifact: string; version: string; environments: string[] } | null;
}

/** A notification to plan: `key` is the same for the same happening (a replayed status write is one notification). */
export interface SourcedNotification {
  key: string;
  facts: NotificationFacts;
}

const deployEnds: Record<string, NotificationEvent> = { succeeded: "succeeded", failed: "failed", rolled_back: "rolled_back" };
const releaseEnds: Record<string, NotificationEvent> = { succeeded: "succeeded", failed: "failed" };

/**
 * The notification an event of the log stands for, or undefined: a deploy starting (its first
 * `running`), waiting for an approval or a promotion, ending; a release started, waiting, ended; a
 * drift check finding drifted targets. Dry runs are never notified.
 */
export function notificationOf(e: SourceEvent): SourcedNotification | undefined {
  const at = e.at;
  const d = e.deploy;
  if (d && d.kind !== "dry_run") {
    const base = {
      of: "deploy" as const,
      id: d.id,
      kind: d.kind,
      tenant: e.tenant,
      application: d.application,
      artifact: d.artifact,
      environment: d.environment,
      version: d.version,
      error: null,
      hint: null,
      drifted: [],
      at,
    };
    if (e.type === "deploy.status") {
      const status = String(e.data.status);
      const event = status === "running" ? "started" : deployEnds[status];
      if (!event) return undefined;
      return { key: `deploy:${d.id}:${event}`, facts: { ...base, event, status, error: errorMessage(e.data.error) } };
    }
    if (e.type === "gate.waiting") {
      const w = e.data.waiting as { kind?: string; until?: unknown; hint?: unknown; step?: unknown } | null;
      // A pause with an end goes on by itself: only an approval or a pause until promoted waits for someone.
      if (!w || !(w.kind === "approval" || (w.kind === "pause" && w.until === null))) return undefined;
      return {
        key: `deploy:${d.id}:waiting:${String(w.step)}:${e.id}`,
        facts: { ...base, event: "waiting", status: "running", hint: typeof w.hint === "string" ? w.hint : null },
      };
    }
    if (e.type === "drift.changed") {
      const targets = Array.isArray(e.data.targets) ? (e.data.targets as { target?: unknown; state?: unknown }[]) : [];
      const drifted = targets.filter((t) => t.state === "drifted").map((t) => String(t.target));
      if (drifted.length === 0) return undefined;
      return { key: `drift:${e.id}`, facts: { ...base, event: "drifted", status: "drifted", drifted } };
    }
    return undefined;
  }
  const r = e.release;
  if (!r) return undefined;
  const base = {
    of: "release" as const,
    id: r.id,
    kind: "release",
    tenant: e.tenant,
    application: r.application,
    artifact: r.artifact,
    environment: r.environments.join(", "),
    version: r.version,
    error: null,
    hint: null,
    drifted: [],
    at,
  };
  if (e.type === "release.created") return { key: `release:${r.id}:started`, facts: { ...base, event: "started", status: "running" } };
  if (e.type === "release.status") {
    const status = String(e.data.status);
    const event = releaseEnds[status];
    if (!event) return undefined;
    return { key: `release:${r.id}:${event}`, facts: { ...base, event, status, error: errorMessage(e.data.error) } };
  }
  if (e.type === "release.updated") {
    const w = e.data.waiting as { kind?: string; stage?: unknown; since?: unknown; hint?: unknown } | null;
    if (!w || (w.kind !== "approval" && w.kind !== "promotion")) return undefined;
    // release.updated is written at every move of the release: one wait is one notification.
    return {
      key: `release:${r.id}:waiting:${String(w.stage)}:${w.kind}:${String(w.since)}`,
      facts: { ...base, event: "waiting", status: "running", hint: typeof w.hint === "string" ? w.hint : null },
    };
  }
  return undefined;
}

function errorMessage(error: unknown): string | null {
  if (!error || typeof error !== "object") return null;
  const m = (error as { message?: unknown }).message;
  return typeof m === "string" ? m : null;
}
