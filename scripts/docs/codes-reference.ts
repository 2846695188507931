import { readFile } from "node:fs/promises";
import ts from "typescript";
import { Exit, exitCodeFor } from "../../src/cli/exit-codes.js";
import { Code, ManentError, codeName } from "../../src/core/errors.js";
import { httpStatus } from "../../src/server/http-status.js";

/**
 * The doc comments of the properties of an exported `const X = { ... }` in a source file, by
 * property name: the values come from the module itself, their meaning from its comments.
 */
async function propertyComments(file: string, constName: string): Promise<Map<string, string>> {
  const source = ts.createSourceFile(file, await readFile(file, "utf8"), ts.ScriptTarget.Latest, true);
  const comments = new Map<string, string>();
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && node.name.getText() === constName && node.initializer) {
      let init: ts.Node = node.initializer;
      while (ts.isAsExpression(init) || ts.isSatisfiesExpression(init) || ts.isParenthesizedExpression(init)) init = init.expression;
      if (ts.isObjectLiteralExpression(init)) {
        for (const prop of init.properties) {
          const docs = ts.getJSDocCommentsAndTags(prop).filter(ts.isJSDoc);
          const text = docs
            .map((d) => ts.getTextOfJSDocComment(d.comment) ?? "")
            .join(" ")
            .trim();
          if (prop.name) comments.set(prop.name.getText(), text.replace(/\s+/g, " "));
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return comments;
}

const cell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\{@link (\w+)\}/g, "`$1`");

/** Error codes (src/core/errors.ts) and CLI exit codes (src/cli/exit-codes.ts). */
export async function codesReference(repoRoot: string): Promise<string> {
  const codeDocs = await propertyComments(`${repoRoot}src/core/errors.ts`, "Code");
  const exitDocs = await propertyComments(`${repoRoot}src/cli/exit-codes.ts`, "Exit");
  const lines = [
    "## Error codes",
    "",
    'Every error manent reports is `{"code", "message", "details"}`: in API responses',
    "(`{\"error\": {…}}`), in a deploy's `error` and its steps' records, and across the plugin protocol",
    "(as the gRPC status of the same number). `details` carries machine-readable facts such as `file`",
    "and `field`, never secrets. An API error answer also carries `request_id`, the id of its request",
    "(as in the `X-Request-Id` answer header and on the server's log lines of that request). A",
    "*permanent* error fails its step at once: retrying the same input cannot fix it. Other errors are",
    "retried up to the step's `max_retries`.",
    "",
    "| Code | gRPC | HTTP | Permanent | CLI exit | When |",
    "|---|---|---|---|---|---|",
  ];
  for (const [key, num] of Object.entries(Code)) {
    const e = new ManentError(num, "");
    lines.push(
      `| \`${codeName(num)}\` | ${num} | ${httpStatus(num)} | ${e.permanent ? "yes" : "no"} | ${exitCodeFor(e)} | ${cell(codeDocs.get(key) || "(not used by manent itself; kept for plugins and the wire)")} |`,
    );
  }
  lines.push(
    "",
    "## Exit codes of `manent`",
    "",
    "| Exit | Name | Meaning |",
    "|---|---|---|",
    ...Object.entries(Exit).map(([key, num]) => `| ${num} | ${key} | ${cell(exitDocs.get(key) ?? "")} |`),
    "",
    "When the server refuses a request (nothing is recorded), `manent` exits with the code in the",
    "*CLI exit* column above; a deploy that ran and failed exits 1 whatever its error's code.",
  );
  return lines.join("\n");
}
