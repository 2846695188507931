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
