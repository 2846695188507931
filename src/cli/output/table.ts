// The colour codes a painter adds, which take no room on a terminal.
const ansi = /\x1b\[[0-9;]*m/g;

/**
 * Rows as a table. On a terminal each column is padded to its widest cell, three spaces apart (as
 * kubectl's tabwriter); in a pipe or a file the cells stay tab-separated, for `cut -f` and awk.
 */
export function tableLines(rows: readonly (readonly string[])[], stream: { isTTY?: boolean } = process.stdout): string[] {
  if (!stream.isTTY) return rows.map((r) => r.join("\t"));
  const widths: number[] = [];
  for (const r of rows) r.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, visibleWidth(cell))));
  return rows.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell + " ".repeat(widths[i]! - visibleWidth(cell) + 3)))
      .join("")
      .trimEnd(),
  );
}

function visibleWidth(cell: string): number {
  return [...cell.replace(ansi, "")].length;
}
