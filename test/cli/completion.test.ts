import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { promisify } from "node:util";
import { cliBin, startServer } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml } from "../support/workspace.js";
import { tempDir } from "../support/temp-dir.js";

const run = promisify(execFile);

/** What `manent completion SHELL` prints, as a user's shell would run it. */
const script = async (shell: string) => (await run(process.execPath, [cliBin, "completion", shell])).stdout;

/**
 * The completion scripts, checked by each shell's own parser and, for bash and fish, by asking the
 * real shell what it completes (bash through the function `complete -p` names, with COMP_WORDS as
 * readline sets them; fish with `complete -C`).
 */
describe("manent completion", () => {
  let dir: string;
  before(async () => {
    dir = await tempDir("manent-completion-");
  });

  it("bash: passes bash -n, is registered for manent, and completes commands, subcommands, flags and their values", async () => {
    const file = join(dir, "manent.bash");
    await writeFile(file, await script("bash"));
    await run("bash", ["-n", file]);
    // Each line: the words typed so far (the last one being completed), then what bash offers.
    const driver = `
      source ${JSON.stringify(file)}
      fn=$(complete -p manent | sed -E 's/.* -F ([^ ]+) .*/\\1/')
      ask() { COMP_WORDS=("$@"); COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 )); COMPREPLY=(); "$fn"; echo "\${COMPREPLY[*]}"; }
      ask manent ""
      ask manent ro
      ask manent plugins ""
      ask manent --server http://127.0.0.1:9 token r
      ask manent deploy --
      ask manent status --w
      ask manent history -o ""
      ask manent history --status ro
      ask manent completion ""
      ask manent deploy -f man
      ask manent -
    `;
    const lines = (await run("bash", ["-c", driver], { cwd: dir })).stdout.split("\n");
    const [top, ro, plugins, token, deployFlags, watch, outputs, status, shells, file_, global] = lines.map((l) => l.split(" "));
    for (const c of ["deploy", "rollback", "status", "history", "plugins", "token", "auth", "version", "completion", "help"])
      assert.ok(top!.includes(c), `no ${c} in ${lines[0]}`);
    assert.deepEqual(ro, ["rollback"]);
    assert.deepEqual(plugins, ["restart"]);
    assert.deepEqual(token, ["revoke"]);
    for (const f of ["--file", "--dry-run", "--version", "--source", "--sha256", "--no-wait", "--output", "--help"])
      assert.ok(deployFlags!.includes(f), `no ${f} in ${lines[4]}`);
    assert.deepEqual(watch, ["--watch"]);
    assert.deepEqual(outputs, ["text", "wide", "json", "yaml"]);
    assert.deepEqual(status, ["rolled_back"]);
    assert.deepEqual(shells, ["bash", "zsh", "fish"]);
    assert.deepEqual(file_, ["manent.bash"], "a descriptor flag completes file names");
    for (const f of ["--server", "--token", "--no-color", "--version", "--help"]) assert.ok(global!.includes(f), `no ${f} in ${lines[10]}`);
  });

  it("zsh: passes zsh -n and registers _manent with compinit", async () => {
    const file = join(dir, "_manent");
    await writeFile(file, await script("zsh"));
    await run("zsh", ["-n", file]);
    const { stdout } = await run("zsh", [
      "-f",
      "-c",
      `autoload -U compinit && compinit -u -d ${dir}/zcompdump && source ${file} && print -r -- $_comps[manent]`,
    ]);
    assert.equal(stdout.trim(), "_manent");
  });

  it("fish: passes fish --no-execute, and fish completes commands, flags and values with their descriptions", async () => {
    const file = join(dir, "manent.fish");
    await writeFile(file, await script("fish"));
    await run("fish", ["--no-execute", file]);
    const ask = async (line: string) =>
      (await run("fish", ["--no-config", "-c", `source ${file}; complete -C ${JSON.stringify(line)}`])).stdout
        .trim()
        .split("\n")
        .map((l) => l.split("\t"));
    assert.deepEqual(await ask("manent dep"), [["deploy", "deploy what a descriptor describes, and follow it to the end"]]);
    assert.deepEqual(
      (await ask("manent auth ")).map(([w]) => w),
      ["can-i", "help", "whoami"],
    );
    assert.deepEqual((await ask("manent status -o ")).map(([w]) => w).sort(), ["json", "text", "wide", "yaml"]);
    assert.ok((await ask("manent status --")).some(([w]) => w === "--watch"));
    // A description goes on past a colon or a parenthesis.
    assert.deepEqual(await ask("manent abo"), [["abort", "abort a rollout now: weight 0, candidate reverted, earlier waves rolled back"]]);
    assert.deepEqual(await ask("manent canc"), [
      ["cancel", "cancel a queued or running deploy (refused once its deploy step has finished: roll back instead)"],
    ]);
  });

  it("completes deploy and release ids from the server, with what each is, in bash and fish", async () => {
    const pg = await TestPostgres.start();
    const ws = await createWorkspace();
    const server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
    try {
      await ws.write("envconfig/untenanted/ids/ids/prod.yml", { plugin: "noop", targets: [{ host: "ids-1" }] });
      const artifact = await ws.write("dist/app.txt", "ids\n");
      const { id } = await server.api.submit({ descriptor: descriptor("ids", "prod", artifact, "3.1.0"), descriptor_file: "ids.yml" });
      assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
      // `manent` on PATH and the server in the environment, as a user who completes has them.
      const bin = ws.path("bin");
      await mkdir(bin);
      await writeFile(join(bin, "manent"), `#!/bin/sh\nexec "${process.execPath}" "${cliBin}" "$@"\n`);
      await chmod(join(bin, "manent"), 0o755);
      const env = { PATH: `${bin}:${process.env.PATH}`, HOME: ws.dir, MANENT_SERVER: server.url };
      const fish = join(dir, "ids.fish");
      await writeFile(fish, await script("fish"));
      const offered = (await run("fish", ["--no-config", "-c", `source ${fish}; complete -C "manent status "`], { env })).stdout;
      assert.equal(offered.trim(), `${id}\tids 3.1.0 in prod, succeeded`);
      const bash = join(dir, "ids.bash");
      await writeFile(bash, await script("bash"));
      const driver = `source ${JSON.stringify(bash)}
        fn=$(complete -p manent | sed -E 's/.* -F ([^ ]+) .*/\\1/')
        COMP_WORDS=(manent cancel "${id.slice(0, 4)}"); COMP_CWORD=2; COMPREPLY=(); "$fn"; echo "\${COMPREPLY[*]}"
        COMP_WORDS=(manent release status ""); COMP_CWORD=3; COMPREPLY=(); "$fn"; echo "[\${COMPREPLY[*]}]"`;
      const [deploys, releases] = (await run("bash", ["-c", driver], { env })).stdout.split("\n");
      assert.equal(deploys, id);
      assert.equal(releases, "[]", "no release yet");
    } finally {
      await server.stop();
      await pg.stop();
    }
  });
});
