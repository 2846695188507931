import { readFile } from "node:fs/promises";
import { parseDocument } from "yaml";
import type { z } from "zod";
import { Code, ManentError } from "../errors.js";

/**
 * Parses YAML text and validates it against a schema. Every failure is an `invalid_argument`
 * ManentError whose message names the file, the field (dotted path) and the reason, and whose
 * details carry `file` and `field` for programs.
 */
export function parseYaml<S extends z.ZodType>(text: string, file: string, schema: S): z.output<S> {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  const yamlError = doc.errors[0];
  if (yamlError) {
    const line = yamlError.linePos?.[0];
    const where = line ? `:${line.line}:${line.col}` : "";
    throw new ManentError(Code.InvalidArgument, `${file}${where}: malformed YAML: ${firstLine(yamlError.message)}`, {
      details: { file },
    });
  }
  return validate(doc.toJS() ?? {}, file, schema);
}

/** Validates already-parsed data, with errors worded as {@link parseYaml}'s. */
export function validate<S extends z.ZodType>(data: unknown, file: string, schema: S): z.output<S> {
  const parsed = schema.safeParse(data);
  if (parsed.success) return parsed.data;
  throw invalidInput(parsed.error, file);
}

/** The `invalid_argument` error for a failed zod parse, naming the file (or request part) and the first bad field. */
export function invalidInput(error: z.ZodError, file: string): ManentError {
  const issue = error.issues[0]!;
  const field = issue.path.map(String).join(".") || "(document)";
  return new ManentError(Code.InvalidArgument, `${file}: ${field}: ${describe(issue)}`, { details: { file, field } });
}

/** Reads and validates a YAML file; a missing file is `not_found` naming the path. */
export async function loadYamlFile<S extends z.ZodType>(path: string, schema: S, label = path): Promise<z.output<S>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new ManentError(Code.NotFound, `${label}: file not found`, { details: { file: label } });
    throw new ManentError(Code.InvalidArgument, `${label}: cannot read: ${(err as Error).message}`, { details: { file: label } });
  }
  return parseYaml(text, label, schema);
}

function describe(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "unrecognized_keys":
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
    case "invalid_type":
      return issue.input === undefined && /received undefined$/.test(issue.message) ? "is required" : issue.message.replace(/^Invalid input: /, "");
    default:
      return issue.message;
  }
}

/** The reason alone: the position is already in front of it, and the excerpt after it spans lines. */
function firstLine(s: string): string {
  return (s.split("\n")[0] ?? s).replace(/ at line \d+, column \d+:?$/, "");
}
