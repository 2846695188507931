import type { ComponentChildren } from "preact";

const statusClass: Record<string, string> = {
  succeeded: "ok",
  deployed: "ok",
  rolled_back: "warn",
  cancelled: "muted",
  skipped: "muted",
  failed: "bad",
  running: "run",
  queued: "muted",
  pending: "muted",
};

/** A status in words and colour (the words carry the meaning; colour only helps). */
export function Status({ status, label }: { status: string; label?: string }) {
  return <span class={`status status-${statusClass[status] ?? "muted"}`}>{label ?? status.replace(/_/g, " ")}</span>;
}

/**
 * The characters of an id shown as a link's text: its last 8. A deploy id is a UUID of version 7,
 * whose first characters are its creation time (the same for deploys a minute apart); the last
 * ones are random in every UUID, older deploys' (version 4) and releases' too.
 */
export function shortId(id: string): string {
  return id.slice(-8);
}

export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const d = new Date(iso);
  return (
    <time dateTime={iso} title={d.toISOString()}>
      {d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" })}
    </time>
  );
}

export function Duration({ ms }: { ms: number | null | undefined }) {
  if (ms == null) return <span class="muted">—</span>;
  return <span class="num">{ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`}</span>;
}

export function ErrorNote({ message }: { message: string | undefined | null }) {
  return message ? (
    <p class="error" role="alert">
      {message}
    </p>
  ) : null;
}

export function Section({ title, children, id }: { title: string; children: ComponentChildren; id?: string }) {
  return (
    <section aria-labelledby={id ?? title.toLowerCase().replace(/\W+/g, "-")}>
      <h2 id={id ?? title.toLowerCase().replace(/\W+/g, "-")}>{title}</h2>
      {children}
    </section>
  );
}
