/** Quotes a string for POSIX sh: single quotes, with embedded quotes closed, escaped and reopened. */
export function sq(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The last `maxLines` lines (and at most `maxChars` characters) of command output, for error messages. */
export function tail(text: string, maxLines = 10, maxChars = 1500): string {
  const lines = text.trimEnd().split("\n");
  const t = lines.slice(-maxLines).join("\n");
  return t.length > maxChars ? `…${t.slice(-maxChars)}` : t;
}

/** Output kept per stream: enough for parsing and error tails, bounded for chatty commands. */
const maxKept = 256 * 1024;

/** Appends `chunk`, keeping only the last {@link maxKept} characters. */
export function appendCapped(buffer: string, chunk: string): string {
  const s = buffer + chunk;
  return s.length > maxKept ? s.slice(-maxKept) : s;
}
