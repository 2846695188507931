import type { Logger } from "../contract/index.js";
import { findEnvconfig, type LoadedConfig } from "../config/index.js";
import { ManentError } from "../errors.js";
import type { DriftChecker } from "./drift-checker.js";
import type { DriftStore, RecordedRelease } from "./drift-record.js";

/** The longest pause between two looks at what is due (a new deploy or envconfig is seen within it). */
const maxTickMs = 10_000;
const minTickMs = 200;
/**
 * How soon after a deploy ends the scheduler looks (its key may be due for a first check): one look
 * for all the deploys that end meanwhile, as a look reads every key with a deploy.
 */
const afterDeployMs = 1_000;

/**
 * The periodic drift checks of one server. Each look lists the keys with a succeeded deploy, reads
 * their envconfig's `drift.interval`, and runs the checks that are due. Due times live in Postgres
 * (`claimCheck`): a restart keeps them, and of several servers sharing the database exactly one
 * runs each check. A key whose deploy is queued or running is not checked (it is changing).
 */
export class DriftScheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private again = false;
  private afterDeploy: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: LoadedConfig,
    private readonly store: DriftStore,
    private readonly checker: DriftChecker,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.wake();
  }

  /** Looks now (a deploy ended: its key may be due for its first check). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.look()
      .catch((err: unknown) => {
        this.logger.warn("drift checks: cannot read what is due", { error: ManentError.from(err).message });
        return maxTickMs;
      })
      .then((nextMs) => {
        this.running = undefined;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.wake();
          return;
        }
        this.timer = setTimeout(() => this.wake(), nextMs);
        this.timer.unref();
      });
  }

  /** A deploy ended: looks within {@link afterDeployMs}, once for every deploy that ends until then. */
  deployEnded(): void {
    if (this.stopped || this.afterDeploy) return;
    this.afterDeploy = setTimeout(() => {
      this.afterDeploy = undefined;
      this.wake();
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

  /** Runs what is due; returns when to look again. */
  private async look(): Promise<number> {
    let next = maxTickMs;
    const due: { release: RecordedRelease; heal: boolean }[] = [];
    for (const release of await this.store.recordedReleases()) {
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
