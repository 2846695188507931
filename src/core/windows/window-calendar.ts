import type { Cron } from "croner";
import { cronOf, type DeployWindowsConfig } from "../config/deploy-windows-config.js";
import { matchesPattern } from "../identity/grants.js";

/** What a deploy is: the scope its windows and freezes are matched against. */
export interface WindowScope {
  tenant: string;
  application: string;
  environment: string;
}

/** Whether a deploy of a scope may run at an instant, and if not, why and until when. */
export type WindowVerdict =
  | { open: true }
  | {
      open: false;
      /** The first instant from which it may run (ms since the epoch); null when none is found within a year (or 200 changes of the rules). */
      until: number | null;
      /** The rule that keeps it out now: `deny window <name>`, `freeze <name>: <reason>`, `outside allow windows <a, b>`. */
      rule: string;
      /** `refuse` when any rule keeping it out now says so. */
      mode: "wait" | "refuse";
    };

interface Span {
  start: number;
  end: number;
}

/** The farthest the next opening is looked for: past it, a deploy is told there is none. */
const horizonMs = 366 * 86_400_000;
/**
 * Bound on the steps of the search, each past the rules closed at one instant (a submission pays for
 * them: croner takes about a millisecond a look here): an hourly deny window of an hour, chained all
 * year, would take 8,784. Past it too, a deploy is told no opening was found.
 */
const maxSteps = 200;

interface CompiledWindow {
  name: string;
  kind: "allow" | "deny";
  durationMs: number;
  mode: "wait" | "refuse";
  cron: Cron;
  scope: WindowScope;
}

/**
 * The deploy windows and freezes of manent.yml, compiled once, answering for a scope and an instant.
 * Semantics as Argo CD's sync windows: without a rule in scope a deploy runs at any time; with allow
 * windows in scope, only while one of them is open; never while a deny window or a freeze in scope
 * is open: deny (and a freeze) wins over allow.
 */
export class WindowCalendar {
  private readonly windows: CompiledWindow[];

  constructor(private readonly config: DeployWindowsConfig) {
    this.windows = config.windows.map((w) => ({
      name: w.name,
      kind: w.kind,
      durationMs: w.duration,
      mode: w.mode,
      cron: cronOf(w.schedule, w.time_zone),
      scope: { tenant: w.tenant, application: w.application, environment: w.environment },
    }));
  }

  /** True when no rule is configured: every deploy runs at any time. */
  get empty(): boolean {
    return this.windows.length === 0 && this.config.freezes.length === 0;
  }

  /** Whether a deploy of `scope` may run at `at` (ms since the epoch); if not, until when and because of which rule. */
  verdict(scope: WindowScope, at: number): WindowVerdict {
    const windows = this.windows.filter((w) => inScope(w.scope, scope));
    const freezes = this.config.freezes.filter((f) => inScope(f, scope));
    if (windows.length === 0 && freezes.length === 0) return { open: true };
    const allows = windows.filter((w) => w.kind === "allow");
    const denies = windows.filter((w) => w.kind === "deny");

    const first = this.blockers(allows, denies, freezes, at);
    if (first.rules.length === 0) return { open: true };
    const mode = first.modes.includes("refuse") ? "refuse" : "wait";
    const rule = first.rules.join("; ");
    // The next opening: past every closing rule in turn, then checked again (an allow window may
    // have closed meanwhile, or a deny window opened).
    let t = first.reopens;
    for (let i = 0; i < maxSteps && t !== null && t - at <= horizonMs; i++) {
      const b = this.blockers(allows, denies, freezes, t);
      if (b.rules.length === 0) return { open: false, until: t, rule, mode };
      t = b.reopens;
    }
    return { open: false, until: null, rule, mode };
  }

  /** The rules keeping a deploy out at `t`, and the earliest instant it could run (null: never). */
  private blockers(
    allows: CompiledWindow[],
    denies: CompiledWindow[],
    freezes: DeployWindowsConfig["freezes"],
    t: number,
  ): { rules: string[]; modes: ("wait" | "refuse")[]; reopens: number | null } {
    const rules: string[] = [];
    const modes: ("wait" | "refuse")[] = [];
    let reopens: number | null = t;
    const after = (end: number | null) => {
      reopens = reopens === null || end === null ? null : Math.max(reopens, end);
    };
    for (const f of freezes) {
      if (f.start <= t && t < f.end) {
        rules.push(`freeze ${f.name}: ${f.reason}`);
        modes.push(f.mode);
        after(f.end);
      }
    }
    for (const w of denies) {
      const span = openSpan(w, t);
      if (span) {
        rules.push(`deny window ${w.name}`);
        modes.push(w.mode);
        after(span.end);
      }
    }
    if (allows.length > 0 && !allows.some((w) => openSpan(w, t))) {
      rules.push(`outside allow window${allows.length > 1 ? "s" : ""} ${allows.map((w) => w.name).join(", ")}`);
      modes.push(...allows.map((w) => w.mode));
      const starts = allows.map((w) => w.cron.nextRun(new Date(t))?.getTime() ?? null).filter((s): s is number => s !== null);
      after(starts.length > 0 ? Math.min(...starts) : null);
    }
    return { rules, modes, reopens };
  }
}

/**
 * The occurrence of window `w` that is open at `t`, if any: the latest start at or before `t`
 * (its end is the latest of all), when it ends after `t`. Occurrences that overlap are chained by
 * the caller, which looks again at the end of this one.
 */
function openSpan(w: CompiledWindow, t: number): Span | undefined {
  // previousRuns answers starts strictly before its reference: one millisecond on includes `t`.
  const start = w.cron.previousRuns(1, new Date(t + 1))[0]?.getTime();
  return start !== undefined && start + w.durationMs > t ? { start, end: start + w.durationMs } : undefined;
}

function inScope(rule: WindowScope, scope: WindowScope): boolean {
  return (
    matchesPattern(rule.tenant, scope.tenant) &&
    matchesPattern(rule.application, scope.application) &&
    matchesPattern(rule.environment, scope.environment)
  );
}
