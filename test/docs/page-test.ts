import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { repoRoot } from "../support/server-process.js";
import { tempDir } from "../support/temp-dir.js";
import { compareOutput, parsePage } from "./doc-runner.js";
import { TerminalSession } from "./terminal-session.js";

/**
 * A page's runnable blocks as tests, in order, in a real shell in a pseudo-terminal against real
 * servers (see doc-runner.ts for the markers). One shell per page, with the environment a
 * reader's shell has and nothing else: the page must say everything the reader sets.
 */

/** `manent` and `manent-server` on PATH as `npm link` puts them: links to the clone's bin/. */
async function linkedBin(dir: string): Promise<string> {
  const bin = join(dir, "bin");
  await mkdir(bin, { recursive: true });
  await symlink(join(repoRoot, "bin/manent.js"), join(bin, "manent"));
  await symlink(join(repoRoot, "bin/manent-server.js"), join(bin, "manent-server"));
  return bin;
}

/** The directories of a reader's PATH: the system's, Node's, and Go's when it is installed. */
function readerPath(): string[] {
  const dirs = [dirname(process.execPath)];
  const go = ["/usr/local/go/bin/go", ...(process.env.PATH ?? "").split(":").map((d) => join(d, "go"))].find((f) => existsSync(f));
  if (go) dirs.push(dirname(go));
  return [...new Set([...dirs, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"])];
}

/** What a login shell on a terminal has: nothing of manent's, no test variable. */
const readerVariables = new Set(["HOME", "PATH", "TERM", "LANG", "USER", "LOGNAME", "SHELL"]);

/**
 * Serializes the pages and tests that use a fixed port of this machine (shared by every clone
 * on it): the pages run a server on the port their manent.yml names, as a reader's would.
 */
export const portLock = (port: number): string[] => ["flock", "-o", `/tmp/manent-port-${port}.lock`];

export interface PageSetup {
  cwd: string;
  home: string;
  env: NodeJS.ProcessEnv;
  wrapper?: string[];
}

/** Registers what stops a thing the set-up started, as soon as it has started it. */
export type Defer = (stop: () => unknown) => void;

/**
 * `setup` defers the stop of each thing it starts as soon as it has started it: they run after
 * the page, last started first, also when the set-up failed halfway (a control plane started
 * before a step that threw was left running, and its file ran into the runner's timeout).
 */
export function testPage(page: string, setup: (defer: Defer) => Promise<PageSetup>): void {
  const items = parsePage(readFileSync(join(repoRoot, page), "utf8"));
  describe(page, () => {
    let session: TerminalSession;
    let fixture: PageSetup;
    const stops: (() => unknown)[] = [];
    before(async () => {
      fixture = await setup((stop) => stops.push(stop));
      // A variable beyond a reader's own is one the page tells the reader to set.
      const markdown = readFileSync(join(repoRoot, page), "utf8");
      for (const name of Object.keys(fixture.env).filter((n) => !readerVariables.has(n)))
        assert.match(markdown, new RegExp(`^\\s*export (?:.* )?${name}=`, "m"), `${page} never tells the reader to set ${name}`);
      session = new TerminalSession(fixture.cwd, fixture.env, fixture.home, fixture.wrapper);
    });
    after(async () => {
      await session?.close();
      for (const stop of stops.reverse()) await stop();
    });
    it("has runnable blocks", () => assert.ok(items.some((i) => i.kind === "run")));
    for (const item of items) {
      const title = item.kind === "run" ? item.code.split("\n")[0]! : `${item.kind} ${item.path}`;
      it(`line ${item.line}: ${title}`, async () => {
        if (item.kind === "repo") {
          assert.equal(
            item.content,
            await readFile(join(repoRoot, item.path), "utf8"),
            `the page shows ${item.path} differently from the repository`,
          );
        } else if (item.kind === "file") {
          await session.writeFile(item.path, item.content);
        } else if (item.background) {
          await session.startBackground(item.code, item.ready);
        } else {
          const r = await session.run(item.code);
          // For authors: DOCS_SHOW_OUTPUT=1 prints what each block printed, to paste into the page.
          if (process.env.DOCS_SHOW_OUTPUT) process.stderr.write(`\n== ${page}:${item.line} (exit ${r.status})\n${r.output}\n`);
          if (r.status !== item.exit) assert.fail(`exit status ${r.status}, the page expects ${item.exit}; output:\n${r.output}`);
          if (item.expected !== undefined) {
            const diff = compareOutput(item.expected, r.output);
            if (diff) assert.fail(diff);
          }
        }
      });
    }
  });
}

/**
 * A temporary HOME (removed when the file ends, temp-dir.ts), and PATH with the linked `manent` and
 * `manent-server`; the shell waits for port 8080 (manent's default listen), which its pages' servers use.
 */
export async function baseSetup(cwd?: string): Promise<PageSetup> {
  const dir = await tempDir("manent-doc-");
  await chmod(dir, 0o755); // the embedded Postgres runs as the postgres user and must reach it
  const home = join(dir, "home");
  await mkdir(home, { recursive: true, mode: 0o755 });
  const bin = await linkedBin(dir);
  const env: NodeJS.ProcessEnv = {
    HOME: home,
    PATH: [bin, ...readerPath()].join(":"),
    TERM: "xterm-256color",
    LANG: "C.UTF-8",
    USER: process.env.USER ?? "root",
    LOGNAME: process.env.USER ?? "root",
    SHELL: "/bin/bash",
  };
  return { cwd: cwd ?? home, home, env, wrapper: portLock(8080) };
}

/**
 * The reader's Go caches in the temporary HOME, where Go looks by default: the build cache linked,
 * and the module cache named in the reader's Go configuration (`go env -w GOMODCACHE=…`, in
 * ~/.config/go/env), not linked. Go keys a package's build by its directory: a module cache
 * reached through a link under a new HOME each run compiled every dependency again (12 s of CPU
 * for examples/go-plugin, 25-68 s of the page in CI), where the reader's own cache, at its one
 * path, has them built.
 */
export async function linkGoCaches(home: string): Promise<void> {
  const [cache, modcache, gopath] = execFileSync("go", ["env", "GOCACHE", "GOMODCACHE", "GOPATH"], { encoding: "utf8" }).trim().split("\n");
  await mkdir(join(home, ".cache"), { recursive: true });
  await symlink(cache!, join(home, ".cache/go-build"));
  await mkdir(join(home, ".config/go"), { recursive: true });
  await writeFile(join(home, ".config/go/env"), `GOMODCACHE=${modcache!}\n`);
  await mkdir(join(home, "go"), { recursive: true });
  if (existsSync(join(gopath!, "bin"))) await symlink(join(gopath!, "bin"), join(home, "go/bin"));
}
