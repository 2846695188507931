import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { repoRoot } from "../support/server-process.js";
import { compareOutput, parsePage, ShellSession } from "./doc-runner.js";

/**
 * A page's runnable blocks as tests, in order, in a real shell against real servers (see
 * doc-runner.ts for the markers). One shell, and at most one manent-server, per page.
 */

/** `manent` and `manent-server` on PATH, as after `npm install -g`; the server on a free port. */
async function shims(dir: string): Promise<string> {
  const bin = join(dir, "bin");
  await mkdir(bin, { recursive: true });
  await writeFile(join(bin, "manent"), `#!/bin/sh\nexec "${process.execPath}" "${repoRoot}bin/manent.js" "$@"\n`);
  // Tests share the machine: the server takes a free port (it prints it; the runner exports
  // MANENT_SERVER), where a reader's would take manent.yml's listen.
  await writeFile(
    join(bin, "manent-server"),
    `#!/bin/sh\nexec "${process.execPath}" "${repoRoot}bin/manent-server.js" "$@" --listen 127.0.0.1:0\n`,
  );
  await chmod(join(bin, "manent"), 0o755);
  await chmod(join(bin, "manent-server"), 0o755);
  return bin;
}

export interface PageSetup {
  cwd: string;
  home: string;
  env: NodeJS.ProcessEnv;
  wrapper?: string[];
  cleanup?: () => Promise<void>;
}

export function testPage(page: string, setup: () => Promise<PageSetup>): void {
  const items = parsePage(readFileSync(join(repoRoot, page), "utf8"));
  describe(page, () => {
    let session: ShellSession;
    let fixture: PageSetup;
    before(async () => {
      fixture = await setup();
      session = new ShellSession(fixture.cwd, fixture.env, fixture.home, fixture.wrapper);
    });
    after(async () => {
      await session?.close();
      await fixture?.cleanup?.();
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
          await session.startBackground(item.code);
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

export async function baseSetup(cwd?: string): Promise<PageSetup> {
  const dir = await mkdtemp(join(tmpdir(), "manent-doc-"));
  await chmod(dir, 0o755); // the embedded Postgres runs as the postgres user and must reach it
  const home = join(dir, "home");
  await mkdir(home, { recursive: true, mode: 0o755 });
  const bin = await shims(dir);
  // MANENT_OUTPUT=text: the pages show what a reader sees on a terminal; this shell's stdout is a pipe (JSON otherwise).
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env.PATH}`, MANENT_LOG_LEVEL: "info", MANENT_OUTPUT: "text" };
  delete env.MANENT_SERVER;
  delete env.MANENT_TOKEN;
  return { cwd: cwd ?? home, home, env, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
