import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";

/** An SSE stream read in the background: every event with the time it reached this process. */
export interface Collected {
  events: (DeployEvent & { receivedAt: number })[];
  /** Resolves with the first event (already received or to come) that matches. */
  waitFor(match: (e: DeployEvent) => boolean): Promise<DeployEvent & { receivedAt: number }>;
  stop(): Promise<void>;
  /** Resolves once the server has answered: from then on, no event is missed. */
  opened: Promise<void>;
  /** Settles when the stream ends by itself (server stopped) or fails. */
  done: Promise<void>;
}

export function collect(baseUrl: string, token: string, path: string, opts: { after?: number; reconnects?: number } = {}): Collected {
  const events: Collected["events"] = [];
  const waiters: { match: (e: DeployEvent) => boolean; resolve: (e: DeployEvent & { receivedAt: number }) => void }[] = [];
  const abort = new AbortController();
  let open = (): void => undefined;
  const opened = new Promise<void>((r) => (open = r));
  const done = new ApiClient(baseUrl, token).streamEvents(
    path,
    (e) => {
      const got = { ...e, receivedAt: Date.now() };
      events.push(got);
      for (const w of [...waiters]) {
        if (w.match(e)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(got);
        }
      }
    },
    {
      signal: abort.signal,
      onOpen: () => open(),
      reconnects: opts.reconnects ?? 0,
      ...(opts.after !== undefined && { after: opts.after }),
    },
  );
  done.catch(() => undefined);
  return {
    events,
    done,
    opened,
    waitFor: (match) => {
      const seen = events.find(match);
      return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ match, resolve }));
    },
    async stop() {
      abort.abort();
      await done.catch(() => undefined);
    },
  };
}
