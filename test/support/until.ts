import assert from "node:assert/strict";

/**
 * Reads until `ok` holds and returns what it read; fails naming `what` and the last value once
 * `deadlineMs` has passed (a safety net, so a stuck state fails its test instead of hanging it).
 */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, deadlineMs = 120_000): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    assert.ok(Date.now() < deadline, `${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
