import type { Command } from "commander";

/** A flag as completion offers it. */
export interface FlagNode {
  /** "-o", "--output". */
  names: string[];
  description: string;
  takesValue: boolean;
  /** The values it takes, when they are a fixed list. */
  choices: string[];
  /** Its value is a file (a descriptor, a PEM, a local artifact). */
  file: boolean;
}

/** A command (the program itself, or a subcommand at any depth) as completion offers it. */
export interface CommandNode {
  /** The words that reach it: ["manent"], ["manent", "plugins", "restart"]. */
  path: string[];
  description: string;
  commands: CommandNode[];
  flags: FlagNode[];
  /** Values of its first argument, when they are a fixed list (a shell, an action, a command for help). */
  argumentChoices: string[];
  /** Its first argument is the id of a deploy or a release: offered from the server (`manent __complete-ids`). */
  argumentIds?: "deploys" | "releases";
}

/** Option values named so are files on this machine. */
const fileValues = new Set(["descriptor", "pem", "source", "file", "path"]);

/**
 * The commands, flags and fixed values of a commander program, read from its definitions (and
 * commander's own help command and flags), so the completion scripts follow the CLI as it changes.
 */
export function completionTree(cmd: Command, parent: string[] = []): CommandNode {
  const help = cmd.createHelp();
  const path = [...parent, cmd.name()];
  const subcommands = help.visibleCommands(cmd);
  const commands = subcommands.map((sub) => {
    const node = completionTree(sub, path);
    // commander's own `help [command]`: its argument is one of its siblings.
    if (sub.name() === "help" && !cmd.commands.includes(sub))
      node.argumentChoices = subcommands.filter((s) => s !== sub).map((s) => s.name());
    return node;
  });
  const flags = help.visibleOptions(cmd).map((o) => {
    const value = /[<[]([^>\]]+)[>\]]/.exec(o.flags)?.[1] ?? "";
    return {
      names: [o.short, o.long].filter((n): n is string => n !== undefined),
      description: oneLine(o.description),
      takesValue: o.required || o.optional,
      choices: o.argChoices ?? [],
      file: fileValues.has(value),
    };
  });
  return {
    path,
    description: oneLine(cmd.description()),
    commands,
    flags,
    argumentChoices: cmd.registeredArguments[0]?.argChoices ?? [],
    ...idsOf(cmd),
  };
}

/** Whether the first argument is a deploy's or a release's id (`<id>`, "deploy id", "the release to retry"). */
function idsOf(cmd: Command): Pick<CommandNode, "argumentIds"> {
  const arg = cmd.registeredArguments[0];
  if (arg?.name() !== "id") return {};
  if (/\brelease\b/.test(arg.description)) return { argumentIds: "releases" };
  if (/\bdeploy\b/.test(arg.description)) return { argumentIds: "deploys" };
  return {};
}

/** Every command of the tree, the program first. */
export function allCommands(node: CommandNode): CommandNode[] {
  return [node, ...node.commands.flatMap(allCommands)];
}

/** A command's key in the generated scripts: its words ("manent deploy"). */
export function commandKey(n: CommandNode): string {
  return n.path.join(" ");
}

/**
 * The quoted "command|word" keys a script's subcommand test matches: each command's subcommands,
 * and (with `valueFlags`) each of its flags that take a value.
 */
export function subcommandKeys(nodes: readonly CommandNode[]): string[] {
  return nodes.flatMap((n) => n.commands.map((c) => shellQuote(`${commandKey(n)}|${c.path.at(-1)}`)));
}

export function valueFlagKeys(nodes: readonly CommandNode[]): string[] {
  return nodes.flatMap((n) =>
    n.flags.filter((f) => f.takesValue).flatMap((f) => f.names.map((flag) => shellQuote(`${commandKey(n)}|${flag}`))),
  );
}

/** The arms of an sh `case` (bash and zsh): `pattern) body ;;` each, then `*) otherwise ;;`. */
export function caseArms(entries: readonly [string, string][], otherwise: string): string {
  return [...entries.map(([pattern, body]) => `    ${pattern}) ${body} ;;`), `    *) ${otherwise} ;;`].join("\n");
}

/** A description short enough for a completion menu: its first clause. */
/** The first sentence, whole up to 120 characters (a colon or a parenthesis does not end it), then cut at a word. */
function oneLine(text: string): string {
  const first = text.replace(/\s+/g, " ").split(/\. /)[0]!.trim();
  if (first.length <= 120) return first;
  const cut = first.slice(0, 119);
  return `${cut.slice(0, Math.max(cut.lastIndexOf(" "), 80))}…`;
}

/** A string as one single-quoted word of sh, bash, zsh (and fish, where only \ and ' need escaping). */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
