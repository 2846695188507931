import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";

/**
 * Runs the runnable blocks of a Markdown page, in order, in one real bash session, and compares
 * each block's output with the output block shown after it.
 *
 * Markers (fenced code blocks' info strings; a code host shows them as ordinary blocks):
 * - ```` ```sh runnable ```` runs the block; `exit=N` expects that exit status (default 0);
 *   `background` starts it in the background and waits until it prints `listening on <url>`,
 *   then exports MANENT_SERVER=<url> in the session (a server "in another terminal").
 * - ```` ```output ```` right after a runnable block is what it prints (stdout and stderr).
 *   Placeholders: `<id>` a deploy id, `<sha256>` 64 hex digits, `<hex>` hex digits, `<n>` a
 *   number, `<time>` an RFC 3339 time, `<any>` anything on one line; a line `...` stands for
 *   any number of lines. `manent`'s `  … step` lines (a step seen running) are ignored on both
 *   sides: whether the CLI sees a step running depends on timing.
 * - ```` ```yaml file=PATH ```` (any language) is written to PATH, relative to the session's
 *   current directory, when the run reaches it: the reader writes the same file.
 * - ```` ```yaml repo=PATH ```` must equal the repository's file PATH (pages that explain a file).
 *
 * `/home/you` in pages stands for the reader's home: the runner maps it to a temporary HOME, in
 * commands and files, and back in outputs.
 */

export type Item =
  | { kind: "run"; line: number; code: string; exit: number; background: boolean; expected?: string }
  | { kind: "file"; line: number; path: string; content: string }
  | { kind: "repo"; line: number; path: string; content: string };

/** The runnable items of a page, in order. */
export function parsePage(markdown: string): Item[] {
  const lines = markdown.split("\n");
  const items: Item[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, info] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !new RegExp(`^\\s*${fence}\\s*$`).test(lines[j]!); j++) body.push(lines[j]!.slice(indent!.length));
    const words = info!.trim().split(/\s+/);
    const opts = new Map(
      words.slice(1).map((w) => (w.includes("=") ? [w.slice(0, w.indexOf("=")), w.slice(w.indexOf("=") + 1)] : [w, ""])),
    );
    const content = body.join("\n") + "\n";
    if (opts.has("runnable")) {
      items.push({ kind: "run", line: i + 1, code: content, exit: Number(opts.get("exit") ?? 0), background: opts.has("background") });
    } else if (words[0] === "output") {
      const prev = items.at(-1);
      if (prev?.kind !== "run" || prev.expected !== undefined)
        throw new Error(`line ${i + 1}: an output block must follow a runnable block`);
      prev.expected = content;
    } else if (opts.has("file")) {
      items.push({ kind: "file", line: i + 1, path: opts.get("file")!, content });
    } else if (opts.has("repo")) {
      items.push({ kind: "repo", line: i + 1, path: opts.get("repo")!, content });
    }
    i = j;
  }
  return items;
}

const placeholders: Record<string, string> = {
  "<id>": "[0-9A-Za-z][0-9A-Za-z_-]*",
  "<sha256>": "[0-9a-f]{64}",
  "<hex>": "[0-9a-f]+",
  "<n>": "\\d+(?:\\.\\d+)?",
  "<time>": "\\d{4}-\\d\\d-\\d\\d[T ]\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?(?:Z|[+-]\\d\\d:?\\d\\d)?",
  "<any>": ".*?",
};

/** `manent`'s progress line of a running step (`  … deploy`) appears only if the CLI polls while it runs. */
const runningStep = /^ {2}… \S+( \(attempt \d+\))?$/;

const clean = (text: string): string =>
  text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => !runningStep.test(l))
    .join("\n")
    .replace(/\n+$/, "");

/** Undefined when `actual` matches `expected` (with placeholders), else a message showing both. */
export function compareOutput(expected: string, actual: string): string | undefined {
  const exp = clean(expected);
  const act = clean(actual);
  let pattern = "^";
  for (const line of exp.split("\n")) {
    if (line.trim() === "...") {
      pattern += "(?:[^\\n]*\\n)*?";
      continue;
    }
    let p = line.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    for (const [name, re] of Object.entries(placeholders)) p = p.split(name).join(re);
    pattern += `${p}\\n`;
  }
  if (new RegExp(`${pattern}$`).test(`${act}\n`)) return undefined;
  return `output differs.\n--- expected (the page)\n${exp}\n--- actual\n${act}\n---`;
}

export interface RunResult {
  output: string;
  status: number;
}

/** One bash process, as a reader's terminal: `cd` and exports carry over between blocks. */
export class ShellSession {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffer = "";
  private waiter: (() => void) | undefined;
  private readonly background: number[] = [];
  private exited = false;

  constructor(
    readonly cwd: string,
    readonly env: NodeJS.ProcessEnv,
    /** `/home/you` in the page stands for this directory. */
    readonly home: string,
    /** Runs bash under this command (e.g. `flock FILE`), when the page needs a resource alone. */
    wrapper: string[] = [],
  ) {
    const [cmd, ...args] = [...wrapper, "bash", "--norc", "--noprofile"];
    this.child = spawn(cmd!, args, { cwd, env: { ...env, HOME: home }, stdio: ["pipe", "pipe", "pipe"] });
    const onData = (d: Buffer) => {
      this.buffer += d.toString();
      this.waiter?.();
    };
    this.child.stdout.on("data", onData);
    this.child.stderr.on("data", onData);
    this.child.on("exit", () => {
      this.exited = true;
      this.waiter?.();
    });
    this.child.stdin.write("exec 2>&1\n");
  }

  /** `/home/you` -> the session's home, in what the page gives the shell. */
  private toReal(text: string): string {
    return text.split("/home/you").join(this.home);
  }

  /** The session's home -> `/home/you`, in what the shell prints. */
  toPage(text: string): string {
    return text.split(this.home).join("/home/you");
  }

  /** Runs a block like a pasted script (stdin is not the session's), returns its output and last status. */
  async run(code: string, timeoutMs = 300_000): Promise<RunResult> {
    const mark = `__DOC_END_${randomBytes(6).toString("hex")}__`;
    this.buffer = "";
    this.child.stdin.write(`{\n${this.toReal(code)}\n} </dev/null\nprintf '\\n${mark} %d\\n' $?\n`);
    const re = new RegExp(`\\n${mark} (\\d+)\\n`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = re.exec(this.buffer);
      if (m) {
        const output = this.buffer.slice(0, m.index);
        this.buffer = this.buffer.slice(m.index + m[0].length);
        return { output: this.toPage(output), status: Number(m[1]) };
      }
      if (this.exited) throw new Error(`the shell exited while running the block:\n${this.toPage(this.buffer)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`the block did not finish within ${timeoutMs / 1000}s; output so far:\n${this.toPage(this.buffer)}`);
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

  /** Starts a block in the background; resolves with the URL it prints as `listening on <url>`. */
  async startBackground(code: string, timeoutMs = 180_000): Promise<string> {
    const log = `${this.home}/.doc-background-${this.background.length}.log`;
    // One simple command, so $! is the server itself and a SIGTERM reaches it (not a subshell).
    if (code.trim().includes("\n")) throw new Error("a background block is one command");
    const started = await this.run(`${code.trim()} >${log} 2>&1 &\necho $!`);
    this.background.push(Number(started.output.trim()));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = await readFile(log, "utf8").catch(() => "");
      const m = /listening on (http:\/\/\S+)/.exec(text);
      if (m) {
        await this.run(`export MANENT_SERVER=${m[1]}`);
        return m[1]!;
      }
      const alive = await this.run(`kill -0 ${this.background.at(-1)} 2>/dev/null && echo alive`);
      if (!alive.output.includes("alive")) throw new Error(`the background block exited:\n${this.toPage(text).slice(-3000)}`);
      if (Date.now() > deadline)
        throw new Error(
          `the background block did not print "listening on" within ${timeoutMs / 1000}s:\n${this.toPage(text).slice(-3000)}`,
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

  /** Stops background processes (SIGTERM, then waits for them), then the shell. */
  async close(): Promise<void> {
    for (const pid of this.background.reverse()) {
      await this.run(`kill -TERM ${pid} 2>/dev/null; for _ in $(seq 1 600); do kill -0 ${pid} 2>/dev/null || break; sleep 0.1; done`).catch(
        () => undefined,
      );
    }
    if (!this.exited) {
      this.child.stdin.end("exit\n");
      await new Promise((r) => this.child.once("exit", r));
    }
  }
}
