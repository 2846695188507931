import type { Logger } from "../contract/index.js";
import { findEnvconfig, type LoadedConfig } from "../config/index.js";
import { ManentError } from "../errors.js";
import type { DriftChecker } from "./drift-checker.js";
import type { DriftStore, RecordedRelease } from "./drift-record.js";

/** The longest pause between two looks at what is due (a new deploy or envconfig is seen within it). */
const maxTickMs = 10_000;
const minTickMs = 200;
/**
 * How soon after a deploy ends the scheduler looks at its key (it may be due for a first check):
 * one look for the keys of all the deploys that end meanwhile.
 */
const afterDeployMs = 1_000;

/** What a look covers: every key with a deploy, or only the keys of deploys that ended since. */
type Scope = "all" | "ended";

/**
 * The periodic drift checks of one server. Each look lists the keys with a succeeded deploy, reads
 * their envconfig's `drift.interval`, and runs the checks that are due. Due times live in Postgres
 * (`claimCheck`): a restart keeps them, and of several servers sharing the database exactly one
 * runs each check. A key whose deploy is queued or running is not checked (it is changing). After
 * deploys end, a look covers their keys only: a look at every key costs a read of every key's
 * records and envconfig, which at every second of a busy fleet grew with the keys, not the deploys.
 * The server tells it of the deploys that it ran itself ({@link deployEnded}): in a fleet each
 * deploy's key is looked at by one server, and the looks at every key cover a server that died first.
 */
export class DriftScheduler {
  private timer: NodeJS.Timeout | undefined;
  /** When the timer's look at every key is due. */
  private dueAt = 0;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** The look asked for while one was running, to run after it. */
  private again: Scope | undefined;
  private afterDeploy: NodeJS.Timeout | undefined;
  /** Deploys that ended and whose keys no look has covered since. */
  private readonly ended = new Set<string>();

  constructor(
    private readonly config: LoadedConfig,
    private readonly store: DriftStore,
    private readonly checker: DriftChecker,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.wake();
  }

  /** Looks now: at every key, or (`ended`) at those of the deploys that ended since the last look. */
  wake(scope: Scope = "all"): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = this.again === "all" || scope === "all" ? "all" : "ended";
      return;
    }
    const deployIds = scope === "ended" ? [...this.ended] : undefined;
    this.ended.clear();
    if (scope === "all") clearTimeout(this.timer);
    this.running = this.look(deployIds)
      .catch((err: unknown) => {
        this.logger.warn("drift checks: cannot read what is due", { error: ManentError.from(err).message });
        return maxTickMs;
      })
      .then((nextMs) => {
        this.running = undefined;
        if (this.stopped) return;
        // A look at some keys only brings the next look at every key forward, never later.
        const at = scope === "all" || this.timer === undefined ? Date.now() + nextMs : Math.min(this.dueAt, Date.now() + nextMs);
        clearTimeout(this.timer);
        this.dueAt = at;
        this.timer = setTimeout(() => this.wake(), Math.max(0, at - Date.now()));
        this.timer.unref();
        if (this.again) {
          const again = this.again;
          this.again = undefined;
          this.wake(again);
        }
      });
  }

  /** A deploy ended: its key is looked at within {@link afterDeployMs}, with those of every deploy that ends until then. */
  deployEnded(deployId: string): void {
    if (this.stopped) return;
    this.ended.add(deployId);
    if (this.afterDeploy) return;
    this.afterDeploy = setTimeout(() => {
      this.afterDeploy = undefined;
      this.wake("ended");
    }, afterDeployMs);
    this.afterDeploy.unref();
  }

  /** Stops looking and waits for the checks under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.afterDeploy);
    await this.running;
  }

  /** Runs what is due among every key (or the keys of `deployIds`); returns when to look again. */
  private async look(deployIds?: string[]): Promise<number> {
    let next = maxTickMs;
    const due: { release: RecordedRelease; heal: boolean }[] = [];
    const releases = deployIds ? await this.store.recordedReleasesOf(deployIds) : await this.store.recordedReleases();
    for (const release of releases) {
      if (release.latest.status === "queued" || release.latest.status === "running") continue;
      let drift;
      try {
        ({
          envconfig: { drift },
        } = await findEnvconfig(this.config, release));
      } catch {
        continue; // an envconfig that no longer loads: its deploys say why
      }
      if (drift.interval === undefined) continue;
      // A quarter of the interval: a check runs at most a quarter late.
      next = Math.min(next, Math.max(minTickMs, Math.floor(drift.interval / 4)));
      if (await this.store.claimCheck(release, drift.interval)) due.push({ release, heal: drift.heal });
    }
    // Logged once the checks due are claimed (a test reads the claims after this line).
    if (deployIds)
      this.logger.debug("drift checks: looked at the keys of deploys that ended", {
        deploys: deployIds,
        keys: releases.length,
        due: due.length,
      });
    await Promise.all(
      due.map(({ release, heal }) =>
        this.checker.check(release, { heal }).catch((err: unknown) =>
          this.logger.warn("drift check failed", {
            tenant: release.tenant,
            application: release.application,
            environment: release.environment,
            error: ManentError.from(err).message,
          }),
        ),
      ),
    );
    return next;
  }
}
