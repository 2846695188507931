/**
 * Reads the runnable blocks of a Markdown page and compares what each printed with the output
 * block shown after it; `terminal-session.ts` runs them, in order, in one bash session in a
 * pseudo-terminal, with only the environment a reader's shell has.
 *
 * Markers (fenced code blocks' info strings; a code host shows them as ordinary blocks):
 * - ```` ```sh runnable ```` runs the block; `exit=N` expects that exit status (default 0);
 *   `background` starts it in the background and waits until it logs `listening on <url>`
 *   (a server "in another terminal"); the page itself says how the CLI reaches it.
 *   `ready="TEXT"` waits for TEXT instead (another program's server, e.g. Vault's banner).
 * - ```` ```output ```` right after a runnable block is what the terminal shows (stdout and
 *   stderr, rendered as a terminal renders them).
 *   Placeholders: `<id>` a deploy id, `<sha256>` 64 hex digits, `<hex>` hex digits, `<n>` a
 *   number, `<time>` an RFC 3339 time, `<any>` anything on one line; a line `...` stands for
 *   any number of lines; a tab stands for the spaces a terminal shows for it. `manent`'s `  … step` lines (a step seen running) are ignored on both
 *   sides: whether the CLI sees a step running depends on timing.
 * - ```` ```yaml file=PATH ```` (any language) is written to PATH, relative to the session's
 *   current directory, when the run reaches it: the reader writes the same file.
 * - ```` ```yaml repo=PATH ```` must equal the repository's file PATH (pages that explain a file).
 *
 * `/home/you` in pages stands for the reader's home: the runner maps it to a temporary HOME, in
 * commands and files, and back in outputs.
 */

export type Item =
  | { kind: "run"; line: number; code: string; exit: number; background: boolean; ready?: string; expected?: string }
  | { kind: "file"; line: number; path: string; content: string }
  | { kind: "repo"; line: number; path: string; content: string };

/** The runnable items of a page, in order. */
export function parsePage(markdown: string): Item[] {
  const lines = markdown.split("\n");
  const items: Item[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, info] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !new RegExp(`^\\s*${fence}\\s*$`).test(lines[j]!); j++) body.push(lines[j]!.slice(indent!.length));
    // Words, or `key="a value with spaces"`.
    const words = info!.trim().match(/[^\s=]+="[^"]*"|\S+/g) ?? [""];
    const opts = new Map(
      words
        .slice(1)
        .map((w) => (w.includes("=") ? [w.slice(0, w.indexOf("=")), w.slice(w.indexOf("=") + 1).replace(/^"(.*)"$/, "$1")] : [w, ""])),
    );
    const content = body.join("\n") + "\n";
    if (opts.has("runnable")) {
      const ready = opts.get("ready");
      items.push({
        kind: "run",
        line: i + 1,
        code: content,
        exit: Number(opts.get("exit") ?? 0),
        background: opts.has("background"),
        ...(ready !== undefined ? { ready } : {}),
      });
    } else if (words[0] === "output") {
      const prev = items.at(-1);
      if (prev?.kind !== "run" || prev.expected !== undefined)
        throw new Error(`line ${i + 1}: an output block must follow a runnable block`);
      prev.expected = content;
    } else if (opts.has("file")) {
      items.push({ kind: "file", line: i + 1, path: opts.get("file")!, content });
    } else if (opts.has("repo")) {
      items.push({ kind: "repo", line: i + 1, path: opts.get("repo")!, content });
    }
    i = j;
  }
  return items;
}

const placeholders: Record<string, string> = {
  "<id>": "[0-9A-Za-z][0-9A-Za-z_-]*",
  "<sha256>": "[0-9a-f]{64}",
  "<hex>": "[0-9a-f]+",
  "<n>": "\\d+(?:\\.\\d+)?",
  "<time>": "\\d{4}-\\d\\d-\\d\\d[T ]\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?(?:Z|[+-]\\d\\d:?\\d\\d)?",
  "<any>": ".*?",
};

/** `manent`'s progress line of a running step (`  … deploy`) appears only if the CLI polls while it runs. */
const runningStep = /^ {2}… \S+( \(attempt \d+\))?$/;

const clean = (text: string): string =>
  text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => !runningStep.test(l))
    .join("\n")
    .replace(/\n+$/, "");

/** Undefined when `actual` matches `expected` (with placeholders), else a message showing both. */
export function compareOutput(expected: string, actual: string): string | undefined {
  const exp = clean(expected);
  const act = clean(actual);
  let pattern = "^";
  for (const line of exp.split("\n")) {
    if (line.trim() === "...") {
      pattern += "(?:[^\\n]*\\n)*?";
      continue;
    }
    let p = line.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    for (const [name, re] of Object.entries(placeholders)) p = p.split(name).join(re);
    // A terminal shows a tab as the spaces to the next tab stop: a page's tab stands for those.
    p = p.split("\t").join("[ \\t]+");
    pattern += `${p}\\n`;
  }
  if (new RegExp(`${pattern}$`).test(`${act}\n`)) return undefined;
  return `output differs.\n--- expected (the page)\n${exp}\n--- actual\n${act}\n---`;
}
