import type { ComponentChildren } from "preact";

/** One column: its header, and what a row shows in it. */
export interface Column<T> {
  label: string;
  cell: (row: T) => ComponentChildren;
  /** The header read out but not shown (an actions column). */
  hideLabel?: boolean;
  /** The row's name: a row header (`th scope="row"`), the title of its card on a phone. */
  rowHeader?: boolean;
  class?: string;
  /** Attributes of the cell (tests and styles find cells by them). */
  attrs?: (row: T) => Record<string, string | undefined>;
}

/**
 * The one table of the list pages (deploys, history, audit, plugins). On a wide screen a table; on
 * a narrow one each row becomes a card whose cells carry their column's name (styles.css,
 * `table.data`), so a phone never scrolls sideways and a screen reader still reads a table.
 */
export function DataTable<T>({
  label,
  columns,
  rows,
  rowKey,
  rowAttrs,
  empty,
  live,
}: {
  label: string;
  columns: Column<T>[];
  rows: T[] | undefined;
  rowKey: (row: T) => string | number;
  rowAttrs?: (row: T) => Record<string, string>;
  empty: string;
  /** Rows arrive live (an event stream): announced politely. */
  live?: boolean;
}) {
  return (
    <>
      <table class="data" aria-label={label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" class={c.class}>
                {c.hideLabel ? <span class="sr-only">{c.label}</span> : c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody aria-live={live ? "polite" : undefined}>
          {(rows ?? []).map((row) => (
            <tr key={rowKey(row)} {...rowAttrs?.(row)}>
              {columns.map((c) => {
                const props = { class: c.class, "data-label": c.hideLabel ? undefined : c.label, ...c.attrs?.(row) };
                // The value in its own box: on a phone, the cell is a line of "label  value".
                const value = <div class="cell-value">{c.cell(row)}</div>;
                return c.rowHeader ? (
                  <th scope="row" {...props}>
                    {value}
                  </th>
                ) : (
                  <td {...props}>{value}</td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
      {rows?.length === 0 && <p class="muted">{empty}</p>}
      {rows === undefined && <p aria-busy="true">Loading…</p>}
    </>
  );
}

/** A wide table kept wide (a grid of targets by phase): it scrolls inside its own box, never the page. */
export function ScrollBox({ label, children }: { label: string; children: ComponentChildren }) {
  // Focusable, so a keyboard can scroll it too.
  return (
    <div class="scroll-box" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
