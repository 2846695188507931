import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import { codeName, ManentError } from "../core/errors.js";
import type { AuditAction, NewAuditEntry, Principal } from "../core/identity/index.js";
import type { ApiEnv } from "./api-deps.js";

/** What a route changes: the tenant (application, environment) acted on, and the deploy when known before acting. */
export interface AuditTarget {
  tenant: string | null;
  application?: string;
  environment?: string;
  deployId?: string;
  /** What was acted on when it is not a deploy (e.g. "plugin sample"); kept as the entry's message. */
  subject?: string;
}

/**
 * Runs an action that changes something and appends it to the audit log with its outcome: "ok",
 * or the error code it failed with (the error is rethrown). The deploy is `target.deployId`, or
 * the `id` of what the action returns (a new deploy). Who and from where come from the request.
 *
 *     return c.json(await audited(c, "approve", { tenant: deploy.tenant, deployId: id }, () => engine.approve(id)), 200);
 */
export async function audited<T>(c: Context<ApiEnv>, action: AuditAction, target: AuditTarget, act: () => Promise<T>): Promise<T> {
  try {
    const out = await act();
    const id = (out as { id?: unknown } | null)?.id;
    await record(
      c,
      action,
      { ...target, deployId: target.deployId ?? (typeof id === "string" ? id : undefined) },
      "ok",
      target.subject ?? null,
    );
    return out;
  } catch (err) {
    await recordFailure(c, action, target, err);
    throw err;
  }
}

/**
 * As `audited`, for an action that writes its own "ok" entry in the transaction of what it changes
 * (a submission: with the deploy's record, one commit instead of two). `act` is given that entry;
 * the action fills in the deploy's id. A failure is recorded here, as `audited` does.
 */
export async function auditedWithin<T>(
  c: Context<ApiEnv>,
  action: AuditAction,
  target: AuditTarget,
  act: (ok: Omit<NewAuditEntry, "deploy_id">) => Promise<T>,
): Promise<T> {
  try {
    const { deploy_id: _none, ...ok } = auditEntry(c, action, target, "ok", target.subject ?? null);
    return await act(ok);
  } catch (err) {
    await recordFailure(c, action, target, err);
    throw err;
  }
}

async function recordFailure(c: Context<ApiEnv>, action: AuditAction, target: AuditTarget, err: unknown): Promise<void> {
  const e = ManentError.from(err);
  const about = target.subject && !e.message.includes(target.subject) ? `${target.subject}: ` : "";
  await record(c, action, target, codeName(e.code), about + e.message);
}

/** Who an entry names: the request's caller, or (for a sign-in) who tried, as far as known. */
export type AuditActor = Pick<Principal, "kind" | "id" | "name" | "email" | "groups">;

/**
 * Appends one entry naming the caller (or `actor`, for a sign-in, where there is no caller yet); a
 * failure to write is logged, never turned into the action's failure (it has happened).
 */
export async function record(
  c: Context<ApiEnv>,
  action: AuditAction,
  target: AuditTarget,
  outcome: string,
  message: string | null,
  actor: AuditActor | undefined = c.get("caller"),
): Promise<void> {
  const { audit, logger } = c.get("services");
  await audit
    .append(auditEntry(c, action, target, outcome, message, actor))
    .catch((err: unknown) => logger.error("cannot write the audit log", { action, error: String(err) }));
}

function auditEntry(
  c: Context<ApiEnv>,
  action: AuditAction,
  target: AuditTarget,
  outcome: string,
  message: string | null,
  actor: AuditActor | undefined = c.get("caller"),
): NewAuditEntry {
  return {
    actor: actor?.name ?? null,
    actor_kind: actor?.kind ?? null,
    actor_id: actor?.id ?? null,
    actor_email: actor?.email ?? null,
    actor_groups: actor ? [...actor.groups] : null,
    tenant: target.tenant,
    application: target.application ?? null,
    environment: target.environment ?? null,
    action,
    deploy_id: target.deployId ?? null,
    outcome,
    message,
    client_address: clientAddress(c),
  };
}

export function clientAddress(c: Context): string | null {
  try {
    return getConnInfo(c).remote.address ?? null;
  } catch {
    return null;
  }
}
