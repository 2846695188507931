import type { DeployWindowsConfig } from "../config/deploy-windows-config.js";
import type { DeployWaiting } from "../engine/deploy-store.js";
import { Code, ManentError } from "../errors.js";
import { WindowCalendar, type WindowScope, type WindowVerdict } from "./window-calendar.js";

/** An admin's override of the deploy windows, given at submission: who, and why (audited). */
export interface WindowOverride {
  reason: string;
  by: string;
}

/** What a deploy held back by a window shows (its record's `waiting`, the `deploy.waiting` event). */
export type WindowWait = DeployWaiting;

/**
 * The deploy windows of this server (`deploy_windows` in manent.yml) with the clock they are read
 * by: the engine's, which a test may set. Deploys and releases' stage deploys are held to them;
 * dry runs change nothing and rollbacks undo a change, so neither is.
 */
export class DeployWindows {
  private readonly calendar: WindowCalendar;

  constructor(
    config: DeployWindowsConfig,
    readonly now: () => number = Date.now,
  ) {
    this.calendar = new WindowCalendar(config);
  }

  get empty(): boolean {
    return this.calendar.empty;
  }

  verdict(scope: WindowScope, at = this.now()): WindowVerdict {
    return this.calendar.verdict(scope, at);
  }

  /**
   * At submission: refuses a deploy that a rule in `refuse` mode keeps out now (failed_precondition,
   * 412), or for which no opening is found within a year; answers the wait a `wait` rule means, if any.
   * An override (checked by the caller to be an admin's) lets it through.
   */
  admit(scope: WindowScope, override?: WindowOverride): WindowWait | undefined {
    if (override || this.empty) return undefined;
    const at = this.now();
    const v = this.verdict(scope, at);
    if (v.open) return undefined;
    const where = `${scope.tenant}/${scope.application} in ${scope.environment}`;
    const how = "an admin may override with a reason (manent deploy --override-window REASON, API field window_override.reason)";
    if (v.mode === "refuse") {
      const next = v.until === null ? "no opening found within a year" : `next opening ${new Date(v.until).toISOString()}`;
      throw new ManentError(Code.FailedPrecondition, `deploy of ${where} refused: outside its deploy window (${v.rule}); ${next}; ${how}`, {
        details: { rule: v.rule, until: v.until === null ? "" : new Date(v.until).toISOString() },
      });
    }
    if (v.until === null) {
      throw new ManentError(
        Code.FailedPrecondition,
        `deploy of ${where} refused: outside its deploy window (${v.rule}) and no opening found within a year; ${how}`,
        { details: { rule: v.rule } },
      );
    }
    return windowWait(v.rule, at, v.until);
  }
}

export function windowWait(rule: string, since: number, until: number | null): WindowWait {
  const when = until === null ? "no opening found within a year" : `until ${new Date(until).toISOString()}`;
  return {
    kind: "deploy_window",
    since: new Date(since).toISOString(),
    until: until === null ? null : new Date(until).toISOString(),
    rule,
    hint: `waiting for deploy window ${when} (${rule})`,
  };
}
