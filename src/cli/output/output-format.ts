import { Option } from "commander";

/** What a command prints: text for people, `wide` (tables with more columns), or a whole document for programs. */
export type Output = "text" | "wide" | "json" | "yaml";

export const outputFormats: readonly Output[] = ["text", "wide", "json", "yaml"];

/** The `-o` flag every command with output takes. */
export function outputOption(): Option {
  return new Option(
    "-o, --output <format>",
    "text, wide (tables with more columns), json or yaml (default: text on a terminal, json when stdout is a pipe or a file)",
  )
    .choices(outputFormats)
    .env("MANENT_OUTPUT");
}

/** JSON for programs (stdout a pipe or a file), text for people; `-o` or MANENT_OUTPUT decide otherwise. */
export function outputOf(chosen: Output | undefined): Output {
  return chosen ?? (process.stdout.isTTY ? "text" : "json");
}

/** Whether the format is a document (json, yaml) rather than lines for people. */
export function isDocument(output: Output): output is "json" | "yaml" {
  return output === "json" || output === "yaml";
}

/** The value as a JSON or YAML document; yaml is loaded only when asked for. */
export async function documentOf(value: unknown, output: "json" | "yaml"): Promise<string> {
  if (output === "json") return JSON.stringify(value, null, 2);
  // Through `default` (module.exports, yaml being CommonJS): the binaries' bundle gives a
  // CommonJS package imported lazily its exports only as the default export, Node also as names.
  const { stringify } = ((await import("yaml")) as unknown as { default: typeof import("yaml") }).default;
  // No aliases: a reader (or a YAML parser with alias limits) gets each value written out.
  return stringify(value, { aliasDuplicateObjects: false }).trimEnd();
}

/** Prints the value as a document when the output chosen (or defaulted) is one; false: the caller prints text. */
export async function printedAsDocument(value: unknown, chosen: Output | undefined): Promise<boolean> {
  const output = outputOf(chosen);
  if (!isDocument(output)) return false;
  process.stdout.write(`${await documentOf(value, output)}\n`);
  return true;
}
