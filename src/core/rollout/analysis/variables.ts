/**
 * `${MANENT_VERSION}`-style variables in analysis queries and URLs. A value comes from the deploy
 * (a version, an application name) and may be hostile, so it is substituted according to where it
 * stands: inside a PromQL string it is escaped for that string (and for a regex matcher, escaped as
 * a regex), in a URL it is percent-encoded, and outside a PromQL string it must be a plain name or
 * number. A value cannot add a matcher, close a selector or start a new expression.
 */

/** The variables the engine passes to every measurement. */
export const analysisVariables = [
  "MANENT_VERSION",
  "MANENT_APPLICATION",
  "MANENT_ENVIRONMENT",
  "MANENT_TENANT",
  "MANENT_PREVIOUS_VERSION",
  "MANENT_WEIGHT",
] as const;
export type AnalysisVariable = (typeof analysisVariables)[number];

/** A template or a value that cannot be used; the message says which variable and why. */
export class VariableError extends Error {
  override readonly name = "VariableError";
}

const maxValueLength = 1024;
const placeholderStart = "${";

type Context = "bare" | "comment" | '"' | "'" | "`";
type Segment = { text: string } | { variable: AnalysisVariable; context: Context; regex: boolean };

/** Reads the `${NAME}` at `at`; throws for a malformed or unknown one. */
function readPlaceholder(text: string, at: number): { name: AnalysisVariable; end: number } {
  const close = text.indexOf("}", at);
  const name = close < 0 ? "" : text.slice(at + 2, close);
  if (close < 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
    throw new VariableError(`malformed variable at offset ${at} (write \${NAME}, e.g. \${MANENT_VERSION})`);
  }
  if (!(analysisVariables as readonly string[]).includes(name)) {
    throw new VariableError(`unknown variable \${${name}} (known: ${analysisVariables.join(", ")})`);
  }
  return { name: name as AnalysisVariable, end: close + 1 };
}

/** Splits a PromQL query into text and variables, each with the context it stands in. */
function promqlSegments(query: string): Segment[] {
  const segments: Segment[] = [];
  let text = "";
  let context: Context = "bare";
  let regex = false;
  const flush = () => {
    if (text) segments.push({ text });
    text = "";
  };
  for (let i = 0; i < query.length;) {
    if (query.startsWith(placeholderStart, i)) {
      const { name, end } = readPlaceholder(query, i);
      flush();
      segments.push({ variable: name, context, regex });
      i = end;
      continue;
    }
    const ch = query[i]!;
    text += ch;
    i++;
    if (context === "bare") {
      if (ch === "#") context = "comment";
      else if (ch === '"' || ch === "'" || ch === "`") {
        // A string right after =~ or !~ is a regular expression.
        regex = /[=!]~\s*$/.test(precedingText(segments, text.slice(0, -1)));
        context = ch;
      }
    } else if (context === "comment") {
      if (ch === "\n") context = "bare";
    } else if (ch === "\\" && context !== "`") {
      if (i < query.length && !query.startsWith(placeholderStart, i)) text += query[i++];
    } else if (ch === context) {
      context = "bare";
      regex = false;
    }
  }
  if (context !== "bare" && context !== "comment") throw new VariableError(`unterminated string literal (${context}) in the query`);
  flush();
  return segments;
}

/** The template text before the current position, enough to see a `=~` in front of a string. */
function precedingText(segments: Segment[], current: string): string {
  let tail = current;
  for (let k = segments.length - 1; k >= 0 && tail.length < 8; k--) {
    const s = segments[k]!;
    if (!("text" in s)) break;
    tail = s.text + tail;
  }
  return tail;
}

/** Checks a query's variables and strings at load: unknown variables and unterminated strings are refused. */
export function checkPromqlTemplate(query: string): void {
  promqlSegments(query);
}

/** Checks a URL's variables at load. */
export function checkUrlTemplate(url: string): void {
  for (let i = url.indexOf(placeholderStart); i >= 0; i = url.indexOf(placeholderStart, i + 1)) readPlaceholder(url, i);
}

const promqlKeywords = new Set([
  "and",
  "or",
  "unless",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "offset",
  "bool",
  "atan2",
  "start",
  "end",
  "inf",
  "nan",
]);

function valueOf(name: AnalysisVariable, vars: Record<string, string>): string {
  const value = vars[name];
  if (value === undefined) throw new VariableError(`variable \${${name}} has no value in this deploy`);
  if (value.length > maxValueLength) throw new VariableError(`variable \${${name}} is longer than ${maxValueLength} characters`);
  if (/[\x00-\x1f\x7f]/.test(value)) throw new VariableError(`variable \${${name}} contains control characters`);
  return value;
}

const regexMeta = /[\\.+*?()|[\]{}^$]/g;

function renderVariable(segment: Extract<Segment, { variable: AnalysisVariable }>, vars: Record<string, string>): string {
  const name = segment.variable;
  let value = valueOf(name, vars);
  switch (segment.context) {
    case "bare":
      if (!/^[A-Za-z0-9_:.]+$/.test(value) || promqlKeywords.has(value.toLowerCase())) {
        throw new VariableError(
          `variable \${${name}} = ${JSON.stringify(value)} cannot stand outside a string in the query: ` +
            `only a name or a number can (quote it: "\${${name}}")`,
        );
      }
      return value;
    case "comment":
      return value;
    case "`":
      if (segment.regex) value = value.replace(regexMeta, "\\$&");
      if (value.includes("`")) throw new VariableError(`variable \${${name}} contains a backtick and stands in a \`raw string\``);
      return value;
    default:
      if (segment.regex) value = value.replace(regexMeta, "\\$&");
      return value.replace(/\\/g, "\\\\").replaceAll(segment.context, `\\${segment.context}`);
  }
}

/** The query with its variables substituted; throws {@link VariableError} for a value that does not fit. */
export function renderPromql(query: string, vars: Record<string, string>): string {
  return promqlSegments(query)
    .map((s) => ("text" in s ? s.text : renderVariable(s, vars)))
    .join("");
}

/** The URL with its variables percent-encoded; throws {@link VariableError} for a missing or bad value. */
export function renderUrl(url: string, vars: Record<string, string>): string {
  checkUrlTemplate(url);
  return url.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: AnalysisVariable) => encodeURIComponent(valueOf(name, vars)));
}
