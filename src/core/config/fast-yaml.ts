import jsYaml from "js-yaml";

/**
 * A fast reading of a YAML document, for the common case only; `undefined` when the document
 * uses anything where js-yaml and `yaml` (which {@link parseYaml} otherwise uses, YAML 1.2 core
 * schema, unique keys, aliases bounded) could disagree, or when js-yaml refuses it. The caller
 * then reads the document with `yaml`, which decides (and words every error). `yaml` builds a
 * whole document tree: a 20,000-target envconfig took it 1.3-1.9 s and ~94 MB; js-yaml 0.3-0.45 s
 * and ~6 MB (bench/README.md, "Large envconfigs").
 *
 * What the result is aligned on (test/core/yaml-parse.test.ts holds a case for each, found by
 * comparing both on generated documents):
 * - plain scalars resolve as `yaml`'s core schema does, by its own patterns: not js-yaml's default
 *   schema's (YAML 1.1 timestamps, merge keys, `!!binary`; `0b1` and `1_000` as numbers);
 * - tags, anchors, aliases and directives (`!!binary`, `&a`/`*a` and their bound of 100,
 *   `%YAML 1.1`) and explicit or collection keys (`? `, `[a]: b`) are left to `yaml`: the text
 *   is refused here when it has a token that could start one;
 * - a key read as null is "" for `yaml` and "null" for js-yaml: a "null" key is left to `yaml`;
 * - what js-yaml accepts and `yaml` refuses or reads otherwise, found by comparing the two on
 *   generated documents, is left to `yaml` ({@link lenientSpot}, {@link hasLongOrOpenLine});
 * - only a mapping at the top (what every manent file is) is taken;
 * - duplicate keys, nesting deeper than 100 and anything else js-yaml refuses are left to `yaml`.
 */
export function fastYaml(text: string): { data: Record<string, unknown> } | undefined {
  if (riskyToken.test(text) || lenientSpot.test(text) || hasLongOrOpenLine(text)) return undefined;
  let data: unknown;
  try {
    data = jsYaml.load(text, { schema: coreSchema });
  } catch {
    return undefined;
  }
  // A top-level scalar or sequence is refused by every manent schema; js-yaml reads some top-level
  // block scalars otherwise (content less indented than their header).
  if (data === null || typeof data !== "object" || Array.isArray(data) || hasNullKey(data)) return undefined;
  return { data: data as Record<string, unknown> };
}

/**
 * A token that may start a tag (`!`), an anchor (`&`), an alias (`*`), an explicit key (`? `),
 * a directive (`%` at a line's start) or a key that is a flow collection (`]:`, `}:`). A property
 * or an indicator starts a line or follows white space or a flow indicator; the same characters
 * inside a string only cost the fast path.
 */
const riskyToken = /(?:^|[\s,[{])(?:[!&*]|\?(?:\s|$))|^%|[\]}][ \t]*:/mu;

/**
 * What js-yaml accepts and `yaml` refuses (or reads otherwise): a tab (`yaml` refuses one in
 * indentation), a comment right after a quote or a flow collection (`"a"#c`), a carriage return
 * alone (not a line break for `yaml`), `---x` or `...x` at a line's start (a scalar for `yaml`, a
 * document marker for js-yaml) and an empty sequence entry, a comment after it or not (`- -` then
 * `- x`: js-yaml puts x in the inner sequence).
 */
const lenientSpot = /\t|["'\]}]#|\r(?!\n)|^(?:---|\.\.\.)[^\s]|(?:^|\s)-(?:[ ]+#.*)?[ ]*$/mu;

const maxLineLength = 1024;

/**
 * A line longer than 1,024 characters (`yaml` refuses an implicit key that long); a line that
 * leaves a flow collection open (`yaml` wants a flow collection's next lines indented deeper than
 * its block, js-yaml does not check; quoted scalars and comments skipped, a quote that does not
 * close on its line counts as open) or has a collection as a key of a flow mapping; a comment line after a key or entry whose value is on the
 * next lines (`yaml` refuses a scalar there after a comment less indented than it); a blank line
 * right after a block scalar's header (`yaml` refuses more-indented leading blank lines, or
 * reads them otherwise).
 */
function hasLongOrOpenLine(text: string): boolean {
  let valueBelow = false;
  let blockHeader = false;
  for (let start = 0; start <= text.length;) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline;
    if (end - start > maxLineLength) return true;
    // The line without the white space around it (as String#trim, without a copy per line).
    let a = start;
    let b = end;
    while (a < b && isSpace(text.charCodeAt(a))) a++;
    while (b > a && isSpace(text.charCodeAt(b - 1))) b--;
    if (a === b) {
      if (blockHeader) return true;
      blockHeader = false;
    } else if (text.charCodeAt(a) === hash) {
      if (valueBelow) return true;
      blockHeader = false;
    } else {
      const line = scanLine(text, a, b);
      if (line.flowOpen) return true;
      const last = text.charCodeAt(b - 1);
      // A line with a comment may hide its ending ":" behind a " #" in a quoted key: counted as one.
      valueBelow = last === colon || last === dash || line.hash;
      blockHeader = line.blockIndicator && blockScalarHeader.test(text.slice(a, b));
    }
    start = end + 1;
  }
  return false;
}

const [hash, colon, dash] = ["#", ":", "-"].map((c) => c.charCodeAt(0)) as [number, number, number];

/** White space as String#trim takes it. */
function isSpace(c: number): boolean {
  return (
    c <= 32 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** A line that ends with a block scalar's header (`|`, `>-`, `|2 # c`). */
const blockScalarHeader = /(?:^|\s)[|>][-+0-9]*(?:\s+#.*)?$/u;

/**
 * One line's flow collections (open at its end, or closed more than opened), and whether it has a
 * `#` or a block scalar indicator anywhere. Quoted scalars are skipped, and the comment.
 */
function scanLine(text: string, start: number, end: number): { flowOpen: boolean; hash: boolean; blockIndicator: boolean } {
  let depth = 0;
  const flows: string[] = [];
  const found = { flowOpen: false, hash: false, blockIndicator: false };
  for (let i = start; i < end; i++) {
    const c = text[i]!;
    if (c === "|" || c === ">") found.blockIndicator = true;
    else if (c === "#") found.hash = true;
    if (found.hash && i > start && text[i - 1] === " " && c === "#") {
      // A comment: only the indicators in it are left to see.
      for (let j = i; j < end; j++) if (text[j] === "|" || text[j] === ">") found.blockIndicator = true;
      break;
    }
    if (c === "[" || c === "{") {
      // A collection as a key of a flow mapping without a value (`{[a]}`): js-yaml makes it "a".
      if (flows.at(-1) === "{" && keyPosition(text, start, i)) return { ...found, flowOpen: true };
      flows.push(c);
      depth++;
    } else if (c === "]" || c === "}") {
      flows.pop();
      depth--;
    } else if ((c === '"' || c === "'") && (i === start || " [{,:".includes(text[i - 1]!))) {
      const close = closingQuote(text, i, end);
      if (close === -1) return { ...found, flowOpen: true };
      for (let j = i; j < close; j++) if (text[j] === "#") found.hash = true;
      i = close;
    }
    if (depth < 0) return { ...found, flowOpen: true };
  }
  found.flowOpen = depth !== 0;
  return found;
}

/** Whether what is at `i` starts an entry of a flow collection: only white space since its `{` or `,`. */
function keyPosition(text: string, start: number, i: number): boolean {
  let j = i - 1;
  while (j >= start && text[j] === " ") j--;
  return j >= start && (text[j] === "{" || text[j] === ",");
}

/** Where the quoted scalar opened at `open` closes on its line, or -1. */
function closingQuote(text: string, open: number, end: number): number {
  const q = text[open];
  for (let i = open + 1; i < end; i++) {
    if (q === '"' && text[i] === "\\") i++;
    else if (text[i] === q) {
      if (q === "'" && text[i + 1] === "'") i++;
      else return i;
    }
  }
  return -1;
}

function hasNullKey(v: unknown): boolean {
  if (v === null || typeof v !== "object") return false;
  if (Array.isArray(v)) return v.some(hasNullKey);
  for (const key in v) {
    if (key === "null" || hasNullKey((v as Record<string, unknown>)[key])) return true;
  }
  return false;
}

/**
 * A plain scalar's type as `yaml`'s core schema resolves it: its patterns, in its order, each
 * constructed as it does. (js-yaml keeps one implicit type per tag, hence the forms of a tag in one.)
 */
const scalar = (tag: string, forms: [RegExp, (s: string) => unknown][]): jsYaml.Type =>
  new jsYaml.Type(`tag:yaml.org,2002:${tag}`, {
    kind: "scalar",
    resolve: (s: unknown) => typeof s === "string" && forms.some(([test]) => test.test(s)),
    construct: (s: string) => forms.find(([test]) => test.test(s))![1](s),
  });

const coreSchema = jsYaml.FAILSAFE_SCHEMA.extend({
  implicit: [
    scalar("null", [[/^(?:~|[Nn]ull|NULL)?$/, () => null]]),
    scalar("bool", [[/^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/, (s) => s[0] === "t" || s[0] === "T"]]),
    scalar("int", [
      [/^0o[0-7]+$/, (s) => parseInt(s.substring(2), 8)],
      [/^[-+]?[0-9]+$/, (s) => parseInt(s, 10)],
      [/^0x[0-9a-fA-F]+$/, (s) => parseInt(s.substring(2), 16)],
    ]),
    scalar("float", [
      [
        /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/,
        (s) => (s.slice(-3).toLowerCase() === "nan" ? NaN : s[0] === "-" ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY),
      ],
      [/^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/, (s) => parseFloat(s)],
      [/^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/, (s) => parseFloat(s)],
    ]),
  ],
});
