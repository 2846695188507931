import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import xterm from "@xterm/headless";

/** How long a session may wait for its wrapper (another page holding the port's lock). */
const startTimeoutMs = 10 * 60_000;

/** The reader's terminal: its size, and what the runner renders a block's output with. */
export const terminalSize = { cols: 120, rows: 40 };

/**
 * What a reader sees of `raw` (bytes written to a terminal): rendered by a terminal emulator
 * (xterm.js, headless), so carriage returns, colours and redrawn lines look as on screen. A line
 * the terminal wrapped is joined back.
 */
export async function renderTerminal(raw: string): Promise<string> {
  const term = new xterm.Terminal({ ...terminalSize, scrollback: 100_000, allowProposedApi: true });
  try {
    await new Promise<void>((r) => term.write(raw, r));
    const buffer = term.buffer.active;
    const lines: string[] = [];
    for (let i = 0; i < buffer.length; i++) {
      const line = buffer.getLine(i);
      if (!line) continue;
      const text = line.translateToString(true);
      if (line.isWrapped && lines.length > 0) lines[lines.length - 1] += text;
      else lines.push(text);
    }
    return lines
      .map((l) => l.trimEnd())
      .join("\n")
      .replace(/\n+$/, "");
  } finally {
    term.dispose();
  }
}

export interface RunResult {
  output: string;
  status: number;
}

/**
 * One bash session in a pseudo-terminal (util-linux `script`), as in a reader's terminal: the
 * commands' stdin, stdout and stderr are the terminal, so the CLI's terminal detection (text,
 * colour, live views) behaves as for the reader; `cd` and exports carry over between blocks. The
 * shell reads the blocks from a FIFO, not from the terminal: nothing is typed, nothing echoed.
 * The session's environment is exactly `env` (with HOME): nothing of the test's own.
 */
export class TerminalSession {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly control: string;
  private readonly fifo: number;
  private buffer = "";
  private waiter: (() => void) | undefined;
  private readonly background: number[] = [];
  private exited = false;
  /** Set when a block did not finish: the shell is still running it and reads nothing more. */
  private stuck: string | undefined;
  /** What the shell prints once it runs (after the wrapper's lock, if any); null once seen. */
  private readyMark: string | null = `__DOC_READY_${randomBytes(6).toString("hex")}__`;

  constructor(
    readonly cwd: string,
    readonly env: NodeJS.ProcessEnv,
    /** `/home/you` in the page stands for this directory. */
    readonly home: string,
    /** Runs the terminal under this command (e.g. `flock FILE`), when the page needs a resource alone. */
    wrapper: string[] = [],
  ) {
    // The FIFO is the runner's, outside the reader's home.
    this.control = mkdtempSync(join(tmpdir(), "manent-doc-tty-"));
    const commands = join(this.control, "commands");
    execFileSync("mkfifo", ["-m", "600", commands]);
    const [cmd, ...args] = [...wrapper, "script", "-qfec", `exec bash --norc --noprofile ${commands}`, "/dev/null"];
    // Its own process group (the wrapper and `script`), so close() can end both at once.
    this.child = spawn(cmd!, args, { cwd, env: { ...env, HOME: home }, stdio: ["pipe", "pipe", "pipe"], detached: true });
    // Read-write: opening a FIFO this way does not wait for the reader.
    this.fifo = openSync(commands, "r+");
    const onData = (d: string) => {
      this.buffer += d;
      this.waiter?.();
    };
    // Decoded per stream, so a character split across two reads (✓, →) stays whole.
    this.child.stdout.setEncoding("utf8");
    this.child.stderr.setEncoding("utf8");
    this.child.stdout.on("data", onData);
    this.child.stderr.on("data", onData);
    this.child.on("exit", () => {
      this.exited = true;
      this.waiter?.();
    });
    this.send(`stty cols ${terminalSize.cols} rows ${terminalSize.rows}\nprintf '\\n${this.readyMark}\\n'\n`);
  }

  /**
   * Waits until the shell runs: a wrapper's lock may be held by another page's session for
   * minutes, which is not the first block's time.
   */
  private async started(timeoutMs: number): Promise<void> {
    if (this.readyMark === null) return;
    const found = await this.waitFor(new RegExp(`\\r?\\n${this.readyMark}\\r?\\n`), timeoutMs);
    if (!found) throw new Error(`the terminal did not start within ${timeoutMs / 1000}s (is its lock held?)`);
    this.readyMark = null;
  }

  /** Waits until `re` matches what the terminal printed; consumes the output up to and including it. */
  private async waitFor(re: RegExp, timeoutMs: number): Promise<{ before: string; match: RegExpExecArray } | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = re.exec(this.buffer);
      if (m) {
        const before = this.buffer.slice(0, m.index);
        this.buffer = this.buffer.slice(m.index + m[0].length);
        return { before, match: m };
      }
      if (this.exited) throw new Error(`the shell exited while running the block:\n${this.toPage(this.buffer)}`);
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiter = () => {
          clearTimeout(t);
          r();
        };
      });
      this.waiter = undefined;
    }
  }

  private send(text: string): void {
    writeSync(this.fifo, text);
  }

  /** `/home/you` -> the session's home, in what the page gives the shell. */
  private toReal(text: string): string {
    return text.split("/home/you").join(this.home);
  }

  /** The session's home -> `/home/you`, in what the terminal shows. */
  toPage(text: string): string {
    return text.split(this.home).join("/home/you");
  }

  /** Runs a block as typed at the prompt; returns what the terminal shows of it and its last status. */
  async run(code: string, timeoutMs = 300_000): Promise<RunResult> {
    if (this.stuck) throw new Error(`the shell is still running an earlier block (${this.stuck})`);
    await this.started(startTimeoutMs);
    const mark = `__DOC_END_${randomBytes(6).toString("hex")}__`;
    this.buffer = "";
    this.send(`{\n${this.toReal(code)}\n}\nprintf '\\n${mark} %d\\n' $?\n`);
    const found = await this.waitFor(new RegExp(`\\r?\\n${mark} (\\d+)\\r?\\n`), timeoutMs);
    if (!found) {
      this.stuck = code.split("\n")[0];
      throw new Error(`the block did not finish within ${timeoutMs / 1000}s; output so far:\n${this.toPage(this.buffer)}`);
    }
    return { output: this.toPage(await renderTerminal(found.before)), status: Number(found.match[1]) };
  }

  /**
   * Starts a block in the background, as "in another terminal", and waits until it prints
   * `listening on <url>` (manent's servers), or `ready` when given (another program's, in its own
   * words). The session learns nothing from it: the page says how to reach it.
   */
  async startBackground(code: string, ready?: string, timeoutMs = 180_000): Promise<void> {
    const log = join(this.control, `background-${this.background.length}.log`);
    // One simple command, so $! is the server itself and a SIGTERM reaches it (not a subshell).
    if (code.trim().includes("\n")) throw new Error("a background block is one command");
    const started = await this.run(`${code.trim()} >${log} 2>&1 &\necho $!`);
    this.background.push(Number(started.output.trim()));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = await readFile(log, "utf8").catch(() => "");
      // The server's JSON log line, as a reader sees it in the other terminal.
      if (ready === undefined ? /listening on https?:\/\/[^\s"]+/.test(text) : text.includes(ready)) return;
      const alive = await this.run(`kill -0 ${this.background.at(-1)} 2>/dev/null && echo alive`);
      if (!alive.output.includes("alive")) throw new Error(`the background block exited:\n${this.toPage(text).slice(-3000)}`);
      if (Date.now() > deadline)
        throw new Error(
          `the background block did not print "${ready ?? "listening on"}" within ${timeoutMs / 1000}s:\n${this.toPage(text).slice(-3000)}`,
        );
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Writes a file the page shows, relative to the session's current directory. */
  async writeFile(path: string, content: string): Promise<void> {
    const pwd = (await this.run("pwd")).output.trim();
    const full = resolve(this.toReal(pwd), this.toReal(path));
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, this.toReal(content));
  }

  /**
   * Stops background processes (SIGTERM, then waits for them), then the shell; a shell still busy
   * with a block that never finished is hung up (its terminal closed), as closing the window does.
   */
  async close(): Promise<void> {
    for (const pid of this.background.reverse()) {
      if (!signal(pid, "SIGTERM")) continue;
      for (let i = 0; i < 600 && signal(pid, 0); i++) await new Promise((r) => setTimeout(r, 100));
    }
    if (!this.exited) {
      const exited = new Promise((r) => this.child.once("exit", r));
      if (!this.stuck) this.send("exit\n");
      // Killing `script` closes the terminal: the shell and what it runs get SIGHUP.
      const t = setTimeout(() => signal(-this.child.pid!, "SIGKILL"), this.stuck ? 0 : 10_000);
      await exited;
      clearTimeout(t);
    }
    closeSync(this.fifo);
    rmSync(this.control, { recursive: true, force: true });
  }
}

/** Sends a signal; false when the process is gone. */
function signal(pid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}
