import { open } from "node:fs/promises";
import { parseDocument } from "yaml";
import type { z } from "zod";
import { Code, ManentError } from "../errors.js";
import { fastYaml } from "./fast-yaml.js";
import { checkSafeData, clipKey } from "./safe-text.js";

/** Configuration files are small; a larger one is refused before it is read whole. */
export const maxYamlBytes = 1 << 20;
/** Aliases a document may expand: a real one uses a few; a "billion laughs" document needs many. */
const maxAliasCount = 100;

/**
 * Parses YAML text and validates it against a schema. Every failure is an `invalid_argument`
 * ManentError whose message names the file, the field (dotted path) and the reason, and whose
 * details carry `file` and `field` for programs.
 */
export function parseYaml<S extends z.ZodType>(text: string, file: string, schema: S): z.output<S> {
  // Most documents: js-yaml, aligned on yaml's reading; anything it may read otherwise, or refuses, is read by yaml.
  const fast = fastYaml(text);
  if (fast) return validate(fast.data, file, schema);
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  const yamlError = doc.errors[0];
  if (yamlError) {
    const line = yamlError.linePos?.[0];
    const where = line ? `:${line.line}:${line.col}` : "";
    throw new ManentError(Code.InvalidArgument, `${file}${where}: malformed YAML: ${firstLine(yamlError.message)}`, {
      details: { file },
    });
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount }) ?? {};
  } catch (err) {
    // yaml throws a ReferenceError when aliases would expand past maxAliasCount.
    throw new ManentError(
      Code.InvalidArgument,
      `${file}: malformed YAML: ${firstLine((err as Error).message)} (at most ${maxAliasCount} aliases)`,
      {
        details: { file },
      },
    );
  }
  return validate(data, file, schema);
}

/** Validates already-parsed data, with errors worded as {@link parseYaml}'s. */
export function validate<S extends z.ZodType>(data: unknown, file: string, schema: S): z.output<S> {
  checkSafeData(data, file);
  const parsed = schema.safeParse(data);
  if (parsed.success) return parsed.data;
  throw invalidInput(parsed.error, file);
}

/** The `invalid_argument` error for a failed zod parse, naming the file (or request part) and the first bad field. */
export function invalidInput(error: z.ZodError, file: string): ManentError {
  const issue = specific(error.issues[0]!);
  const field = issue.path.map(String).join(".") || "(document)";
  const reason = describe(issue);
  // A reason may quote the input (a bad duration, a bad URL): bounded, so a huge value is not echoed whole.
  const bounded = reason.length > 300 ? `${reason.slice(0, 300)}…` : reason;
  return new ManentError(Code.InvalidArgument, `${file}: ${clipField(field)}: ${bounded}`, { details: { file, field: clipField(field) } });
}

/** Reads and validates a YAML file; a missing file is `not_found` naming the path. */
export async function loadYamlFile<S extends z.ZodType>(path: string, schema: S, label = path): Promise<z.output<S>> {
  return parseYaml(await readYamlText(path, label), label, schema);
}

/** A YAML file's text, refused when larger than {@link maxYamlBytes}; a missing file is `not_found` naming the path. */
export async function readYamlText(path: string, label = path): Promise<string> {
  let text: string;
  try {
    const handle = await open(path, "r");
    try {
      // Not zero-filled (a megabyte at every read): only the bytes read into it are looked at.
      const buffer = Buffer.allocUnsafe(maxYamlBytes + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      if (bytesRead > maxYamlBytes) {
        throw new ManentError(Code.InvalidArgument, `${label}: larger than ${maxYamlBytes} bytes`, { details: { file: label } });
      }
      text = buffer.subarray(0, bytesRead).toString("utf8");
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof ManentError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw fileNotFound(label);
    throw new ManentError(Code.InvalidArgument, `${label}: cannot read: ${(err as Error).message}`, { details: { file: label } });
  }
  return text;
}

/** The `not_found` error for a YAML file that does not exist. */
export function fileNotFound(label: string): ManentError {
  return new ManentError(Code.NotFound, `${label}: file not found`, { details: { file: label } });
}

/**
 * For a value that matches no branch of a union (a rollout step is one of several shapes), the
 * issue of the branch that got furthest, under its full path: "approval.approvers.count: expected
 * a number" rather than "Invalid input" (and "set_mirror: too big" rather than "set_weight: is required").
 */
function specific(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  // A record's key refused: why, rather than "Invalid key in record".
  if (issue.code === "invalid_key" && issue.issues[0]) return { ...issue.issues[0], path: issue.path } as z.core.$ZodIssue;
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  // At equal depth, a branch whose own key is there (a wrong value) beats one missing its key.
  // (A union is missing when a branch says so and the others are literals, which do not say what they got.)
  const missing = (i: z.core.$ZodIssue): boolean => {
    if (i.code === "invalid_type") return /received undefined$/.test(i.message);
    if (i.code !== "invalid_union") return false;
    const firsts = i.errors.map((b) => b[0]).filter((b): b is z.core.$ZodIssue => b !== undefined && b.path.length === 0);
    return firsts.length === i.errors.length && firsts.some(missing) && firsts.every((b) => missing(b) || b.code === "invalid_value");
  };
  const rank = (i: z.core.$ZodIssue): number => i.path.length * 2 + (missing(i) ? 0 : 1);
  const best = issue.errors
    .map((branch) => branch[0])
    .filter((i): i is z.core.$ZodIssue => i !== undefined)
    .reduce<z.core.$ZodIssue | undefined>((a, b) => (a && rank(a) >= rank(b) ? a : b), undefined);
  if (!best) return issue;
  if (best.path.length === 0) {
    // Every branch refused the value itself (`pause: x`, a duration or a mapping): the one branch
    // whose type it had says why ("x" is not a duration), rather than "Invalid input".
    const firsts = issue.errors.map((branch) => branch[0]);
    const ofItsType = firsts.filter(
      (i) => i !== undefined && i.path.length === 0 && i.code !== "invalid_type" && i.code !== "invalid_union",
    );
    if (ofItsType.length !== 1 || firsts.some((i) => i !== undefined && i.path.length > 0)) return issue;
    return { ...ofItsType[0]!, path: issue.path } as z.core.$ZodIssue;
  }
  return specific({ ...best, path: [...issue.path, ...best.path] });
}

function describe(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "unrecognized_keys": {
      // Bounded: a hostile document may have thousands of keys, or very long ones.
      const shown = issue.keys.slice(0, maxKeysShown).map((k) => `"${clipKey(k)}"`);
      const more = issue.keys.length > maxKeysShown ? ` and ${issue.keys.length - maxKeysShown} more` : "";
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${shown.join(", ")}${more}`;
    }
    case "invalid_type": {
      // zod names what it received at the end of its message ("…, received string"); the input itself is not kept.
      const received = /received (\w+)$/.exec(issue.message)?.[1];
      if (received === "undefined") return "is required";
      return `expected ${kindNames[issue.expected] ?? issue.expected}, got ${received ? (receivedNames[received] ?? `a ${received}`) : "something else"}`;
    }
    default:
      return issue.message;
  }
}

const maxKeysShown = 5;

function clipField(field: string): string {
  return field.length > 200 ? `${field.slice(0, 200)}…` : field;
}

const kindNames: Record<string, string> = {
  object: "a mapping",
  record: "a mapping",
  array: "a list",
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  null: "nothing",
};

const receivedNames: Record<string, string> = {
  object: "a mapping",
  array: "a list",
  string: "a string",
  number: "a number",
  boolean: "true or false",
  null: "nothing (null)",
  NaN: "not a number",
};

/** The reason alone: the position is already in front of it, and the excerpt after it spans lines. */
function firstLine(s: string): string {
  return (s.split("\n")[0] ?? s).replace(/ at line \d+, column \d+:?$/, "");
}
