import { useEffect, useRef, useState } from "preact/hooks";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import type { Api } from "./api.js";

/** The part of the URL after `#`, split into segments: `#/deploys/ID` is ["deploys", "ID"]. */
export function useHashRoute(): string[] {
  const read = (): string[] => location.hash.replace(/^#\/?/, "").split("?")[0]!.split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = (): void => setRoute(read());
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

export function navigate(...segments: string[]): void {
  location.hash = `#/${segments.map(encodeURIComponent).join("/")}`;
}

/**
 * Follows an event stream of the API while the component is shown (`key` changes restart it);
 * reconnects resume with Last-Event-ID. Events are handed over as they arrive, no polling.
 */
export function useEventStream(
  api: Api,
  path: string | null,
  onEvent: (e: DeployEvent) => void,
  opts: { after?: number } = {},
  key: unknown[] = [],
): void {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => {
    if (!path) return;
    const abort = new AbortController();
    void api.stream(path, (e) => handler.current(e), abort.signal, opts.after);
    return () => abort.abort();
  }, [path, ...key]);
}

/** Loads something once per `key`, keeping the previous value while reloading (no flashing). */
export function useLoad<T>(
  load: () => Promise<T>,
  key: unknown[],
): { value: T | undefined; error: string | undefined; setValue: (v: T | ((prev: T | undefined) => T)) => void } {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    let live = true;
    load().then(
      (v) => live && (setValue(() => v), setError(undefined)),
      (err: unknown) => live && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => {
      live = false;
    };
  }, key);
  return { value, error, setValue: setValue as (v: T | ((prev: T | undefined) => T)) => void };
}

/**
 * Runs `read` again after events, coalesced: once the events have been quiet for `quietMs`, and at
 * least every `maxWaitMs` while they keep coming (a long rollout), never two reads at once (events
 * during a read bring one more read after it). Returns the function to call on each event.
 */
export function useCoalescedRead(read: () => Promise<void>, { quietMs = 250, maxWaitMs = 2000 } = {}): () => void {
  const latest = useRef(read);
  latest.current = read;
  const s = useRef<{ timer?: ReturnType<typeof setTimeout>; firstAt: number; reading: boolean; again: boolean; gone: boolean }>({
    firstAt: 0,
    reading: false,
    again: false,
    gone: false,
  });
  useEffect(
    () => () => {
      s.current.gone = true;
      clearTimeout(s.current.timer);
    },
    [],
  );
  const schedule = useRef(() => {
    const st = s.current;
    if (st.gone) return;
    const now = Date.now();
    if (st.firstAt === 0) st.firstAt = now;
    clearTimeout(st.timer);
    st.timer = setTimeout(() => void run(), Math.min(quietMs, Math.max(0, st.firstAt + maxWaitMs - now)));
  });
  const run = async (): Promise<void> => {
    const st = s.current;
    st.timer = undefined;
    st.firstAt = 0;
    if (st.reading) {
      st.again = true;
      return;
    }
    st.reading = true;
    try {
      await latest.current();
    } finally {
      st.reading = false;
      if (st.again) {
        st.again = false;
        schedule.current();
      }
    }
  };
  return schedule.current;
}
