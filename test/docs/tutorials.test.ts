import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { repoRoot } from "../support/server-process.js";
import { startSshHosts, type SshdServer } from "../support/sshd/index.js";
import { compareOutput, parsePage, ShellSession } from "./doc-runner.js";

/**
 * The tutorials' runnable blocks, run in order in a real shell against real servers (see
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

interface PageSetup {
  cwd: string;
  home: string;
  env: NodeJS.ProcessEnv;
  wrapper?: string[];
  cleanup?: () => Promise<void>;
}

function testPage(page: string, setup: () => Promise<PageSetup>): void {
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

async function baseSetup(cwd?: string): Promise<PageSetup> {
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

// The quickstart's files, run by hand. Its targets (/tmp/manent-quickstart) are shared with
// test/quickstart.test.ts: both hold this lock while they use them.
testPage("docs/getting-started.md", async () => ({ ...(await baseSetup(repoRoot)), wrapper: ["flock", "/tmp/manent-quickstart.lock"] }));

// Two real sshd "hosts" on loopback addresses, letting the deploy user in with a generated key.
testPage("docs/tutorials/remote-copy-ssh.md", async () => {
  const base = await baseSetup();
  const hosts = await startSshHosts(2);
  const [web1, web2] = hosts.servers as [SshdServer, SshdServer];
  await mkdir(join(base.home, ".ssh"), { recursive: true, mode: 0o700 });
  await writeFile(join(base.home, ".ssh/manent_deploy"), hosts.userKey.privateKey, { mode: 0o600 });
  return {
    ...base,
    env: {
      ...base.env,
      WEB1: web1.host,
      WEB1_PORT: String(web1.port),
      WEB2: web2.host,
      WEB2_PORT: String(web2.port),
      DEPLOY_USER: hosts.user.name,
      // Both "hosts" are this machine: {host} keeps their releases apart.
      DEPLOY_BASE: join(await hosts.ownedDir("hello"), "{host}"),
    },
    cleanup: async () => {
      await hosts.close();
      await base.cleanup?.();
    },
  };
});

// The sample plugins of examples/, built and run through manent from the repository's root.
testPage("docs/tutorials/external-plugin.md", async () => {
  const base = await baseSetup(repoRoot);
  // The reader's Go caches; the session's temporary HOME would otherwise start them cold.
  const goEnv = execFileSync("go", ["env", "GOCACHE", "GOMODCACHE", "GOPATH"], { encoding: "utf8" }).trim().split("\n");
  return { ...base, env: { ...base.env, GOCACHE: goEnv[0], GOMODCACHE: goEnv[1], GOPATH: goEnv[2] } };
});
