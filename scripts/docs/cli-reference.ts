import { Command, type Option } from "commander";

/**
 * The CLI reference, from the commander programs the binaries build. Each `main()` builds its
 * program and calls `parseAsync`; that call is intercepted here to capture the program instead of
 * running it, so the reference is the definition itself (commands, arguments, flags, help texts).
 */
async function captureProgram(main: (argv: string[]) => Promise<void>): Promise<Command> {
  const original = Command.prototype.parseAsync;
  let captured: Command | undefined;
  Command.prototype.parseAsync = function (this: Command) {
    captured ??= this;
    return Promise.resolve(this);
  };
  try {
    await main(["node", "manent"]);
  } finally {
    Command.prototype.parseAsync = original;
  }
  if (!captured) throw new Error("the CLI's main() did not call parseAsync: cannot read its commands");
  return captured;
}

const cell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

function optionRows(options: readonly Option[]): string[] {
  const rows = ["| Flag | Description | Default | Environment |", "|---|---|---|---|"];
  for (const o of options) {
    if (o.hidden) continue;
    let description = o.description ?? "";
    if (o.argChoices) description += ` (one of: ${o.argChoices.join(", ")})`;
    const dflt = o.defaultValue === undefined || o.negate ? "" : `\`${String(o.defaultValue)}\``;
    rows.push(`| \`${cell(o.flags)}\` | ${cell(description)} | ${dflt} | ${o.envVar ? `\`${o.envVar}\`` : ""} |`);
  }
  return rows;
}

function usage(cmd: Command, parents: string[]): string {
  return [...parents, cmd.name(), cmd.usage()].join(" ");
}

function renderCommand(cmd: Command, parents: string[], depth: number): string[] {
  const lines: string[] = [];
  const title = [...parents, cmd.name()].join(" ");
  lines.push(`${"#".repeat(depth)} \`${title}\``, "");
  if (cmd.description()) lines.push(cmd.description().replace(/^./, (c) => c.toUpperCase()) + ".", "");
  lines.push("```", usage(cmd, parents), "```", "");
  const args = cmd.registeredArguments;
  if (args.length) {
    lines.push("| Argument | Description |", "|---|---|");
    for (const a of args) lines.push(`| \`${a.name()}\` | ${cell(a.description)}${a.required ? "" : " (optional)"} |`);
    lines.push("");
  }
  if (cmd.options.length) lines.push(...optionRows(cmd.options), "");
  for (const sub of shown(cmd)) lines.push(...renderCommand(sub, [...parents, cmd.name()], depth + 1));
  return lines;
}

/** The subcommands a user is told of: not the hidden ones (the completion scripts' `__complete-ids`). */
function shown(cmd: Command): readonly Command[] {
  return cmd.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden);
}

/** Commands and flags without help text, as `program command --flag`. */
function undocumented(cmd: Command, parents: string[]): string[] {
  const path = [...parents, cmd.name()];
  const out: string[] = [];
  if (!cmd.description() && cmd.name() !== "help") out.push(path.join(" "));
  for (const o of cmd.options) if (!o.description) out.push(`${path.join(" ")} ${o.long ?? o.flags}`);
  for (const sub of shown(cmd)) out.push(...undocumented(sub, path));
  return out;
}

/** The Markdown reference of one program: global options, then every command; and what lacks help text. */
export async function cliReference(main: (argv: string[]) => Promise<void>): Promise<{ markdown: string; undocumented: string[] }> {
  const program = await captureProgram(main);
  const missing = undocumented(program, []).filter((p) => p !== program.name());
  const lines: string[] = [];
  lines.push(`## \`${program.name()}\``, "");
  if (program.description()) lines.push(program.description().replace(/^./, (c) => c.toUpperCase()) + ".", "");
  lines.push("```", usage(program, []), "```", "");
  if (program.options.length) lines.push("Options before the command:", "", ...optionRows(program.options), "");
  for (const sub of shown(program)) lines.push(...renderCommand(sub, [program.name()], 3));
  return { markdown: lines.join("\n"), undocumented: missing };
}
