import { createParser } from "eventsource-parser";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import type { Principal } from "../../src/core/identity/principal.js";

/**
 * The browser's client of the API: same routes and error shape as the CLI's. Signed in with an API
 * token, it sends the token (kept in this tab's session storage); signed in with the provider
 * (`token` null), the session cookie goes by itself and every request carries the session's CSRF
 * token, which the server requires on every change.
 */
export class Api {
  constructor(readonly token: string | null) {}

  private credentials(): Record<string, string> {
    if (this.token !== null) return { authorization: `Bearer ${this.token}` };
    const csrf = /(?:^|;\s*)manent_csrf=([^;]*)/.exec(document.cookie)?.[1];
    return csrf ? { "x-manent-csrf": decodeURIComponent(csrf) } : {};
  }

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(path, {
      method,
      headers: { ...this.credentials(), ...(body !== undefined && { "content-type": "application/json" }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    const json = (text ? JSON.parse(text) : {}) as { error?: { code: string; message: string } };
    if (!res.ok) throw new Error(json.error ? `${json.error.message} (${json.error.code})` : `HTTP ${res.status}`);
    return json as T;
  }

  /** Follows an SSE route until aborted; reconnects resume after the last event seen (Last-Event-ID). */
  async stream(path: string, onEvent: (e: DeployEvent) => void, signal: AbortSignal, after?: number): Promise<void> {
    let last = after;
    while (!signal.aborted) {
      try {
        const res = await fetch(path, {
          headers: {
            ...this.credentials(),
            accept: "text/event-stream",
            ...(last !== undefined && { "last-event-id": String(last) }),
          },
          signal,
        });
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        const parser = createParser({
          onEvent: (m) => {
            const e = JSON.parse(m.data) as DeployEvent;
            last = e.id;
            onEvent(e);
          },
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
      } catch {
        if (signal.aborted) return;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** The caller, as GET /api/v1/whoami answers (a Principal). */
export type Me = Principal;

/** The one tenant the caller's grants name, if they name exactly one without a pattern (a tenant's token). */
export function oneTenant(me: Me): string | undefined {
  const tenants = new Set(me.grants.map((g) => g.scope.tenant));
  const [only] = tenants;
  return tenants.size === 1 && only !== undefined && !only.includes("*") ? only : undefined;
}

/** What the caller's grants reach, for the header: "all tenants", or the tenant patterns. */
export function reach(me: Me): string {
  const tenants = [...new Set(me.grants.map((g) => g.scope.tenant))];
  if (tenants.includes("*")) return "all tenants";
  return tenants.length === 0 ? "no access" : `tenant ${tenants.join(", ")}`;
}

const key = "manent.token";
export const savedToken = (): string | null => sessionStorage.getItem(key);
export const saveToken = (t: string): void => sessionStorage.setItem(key, t);
export const forgetToken = (): void => sessionStorage.removeItem(key);

/** The provider people sign in with, when the server has one (GET /auth/oidc). */
export async function signInProvider(): Promise<{ name: string } | undefined> {
  const res = await fetch("/auth/oidc");
  return res.ok ? ((await res.json()) as { name: string }) : undefined;
}
