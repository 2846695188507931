import { spawn } from "node:child_process";
import { once } from "node:events";
import { stripVTControlCharacters } from "node:util";

export interface TerminalRun {
  code: number;
  /** Every byte the program wrote to its terminal (with its escape sequences, newlines as \r\n). */
  output: string;
}

/**
 * Runs a command line in a real pseudo-terminal (util-linux `script`), as a person at a terminal
 * would: stdin, stdout and stderr are the terminal, of `cols` x `rows`. `onOutput` sees the output
 * so far at each write, so a test can act on what the screen shows (send a command, then wait on).
 */
export async function runInTerminal(
  line: string,
  opts: { cwd: string; env: NodeJS.ProcessEnv; cols?: number; rows?: number; onOutput?: (output: string) => void },
): Promise<TerminalRun> {
  const command = `stty cols ${opts.cols ?? 160} rows ${opts.rows ?? 80}; ${line}`;
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    cwd: opts.cwd,
    env: { TERM: "xterm-256color", ...opts.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => {
    output += d.toString();
    opts.onOutput?.(output);
  });
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code: code ?? -1, output };
}

/** The last view a program drew with "erase below" (ESC [ J), as the screen shows it at the end: no escapes, \n line ends. */
export function lastDrawing(output: string): string {
  const at = output.lastIndexOf("\x1b[J");
  return stripVTControlCharacters(at < 0 ? output : output.slice(at)).replace(/\r\n/g, "\n");
}
