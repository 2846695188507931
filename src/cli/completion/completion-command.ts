import { Argument, type Command } from "commander";

const shells = ["bash", "zsh", "fish"] as const;

/** `manent completion bash|zsh|fish`: a completion script made from the program's own definitions. */
export function completionCommand(program: Command): void {
  program
    .command("completion")
    .description("print a shell completion script for commands, flags and their values (bash, zsh or fish)")
    .addArgument(new Argument("<shell>", "the shell").choices(shells))
    .addHelpText(
      "after",
      `
Load it in this shell, or install it for every shell:
  bash:  source <(manent completion bash)      manent completion bash > ~/.local/share/bash-completion/completions/manent
  zsh:   source <(manent completion zsh)       manent completion zsh > "\${fpath[1]}/_manent"
  fish:  manent completion fish | source       manent completion fish > ~/.config/fish/completions/manent.fish`,
    )
    .action(async (shell: (typeof shells)[number]) => {
      const [{ completionTree }, { bashCompletion }, { zshCompletion }, { fishCompletion }] = await Promise.all([
        import("./completion-tree.js"),
        import("./bash-completion.js"),
        import("./zsh-completion.js"),
        import("./fish-completion.js"),
      ]);
      const tree = completionTree(program);
      const script = shell === "bash" ? bashCompletion(tree) : shell === "zsh" ? zshCompletion(tree) : fishCompletion(tree);
      process.stdout.write(script);
    });
}
