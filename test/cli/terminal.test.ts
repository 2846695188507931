import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { after, before, describe, it } from "node:test";
import { promisify, stripVTControlCharacters } from "node:util";
import { parse as parseYaml } from "yaml";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { cliBin, startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { lastDrawing, runInTerminal } from "../support/terminal.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const run = promisify(execFile);
/** SGR colour sequences (ESC [ 3x m): what colour on a terminal writes. */
const colour = /\x1b\[3\dm/;

/**
 * The CLI at a real terminal (a pseudo-terminal) and in a pipe, as a person types it: `manent` on
 * PATH, the server named with --server, no output format or colour forced by the environment.
 */
describe("manent at a terminal and in a pipe", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let env: NodeJS.ProcessEnv;

  /** A command line in bash, stdout a pipe. */
  const shell = async (line: string) => {
    try {
      const r = await run("bash", ["-o", "pipefail", "-c", line], { cwd: ws.dir, env, timeout: 120_000 });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
    }
  };
  const app = async (name: string, rollout?: Record<string, unknown>) => {
    await ws.write(`envconfig/untenanted/${name}/${name}/prod.yml`, {
      plugin: "noop",
      targets: [
        { host: `${name}-eu`, labels: { region: "eu" } },
        { host: `${name}-us`, labels: { region: "us" } },
      ],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      ...(rollout && { rollout }),
    });
    return ws.write(`${name}.yml`, descriptor(name, "prod", "dist/app.txt", "2.0.0"));
  };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("dist/app.txt", "terminal\n");
    server = await startServer(await ws.write("manent.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
    const bin = ws.path("bin");
    await mkdir(bin);
    await writeFile(`${bin}/manent`, `#!/bin/sh\nexec "${process.execPath}" "${cliBin}" "$@"\n`);
    await chmod(`${bin}/manent`, 0o755);
    env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
    // What the test runner's own environment might hold is not the user's choice.
    for (const name of ["MANENT_OUTPUT", "MANENT_SERVER", "MANENT_TOKEN", "NO_COLOR", "FORCE_COLOR"]) delete env[name];
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("redraws one live view of steps, waves, canary weight and targets in place, promoted at each pause, and leaves the final view", async () => {
    const file = await app("live", {
      waves: { by: ["region"] },
      canary: { steps: [{ set_weight: 20 }, { pause: {} }, { set_weight: 100 }] },
    });
    const submitted = await shell(`manent --server ${server.url} deploy -f ${file} --no-wait`);
    assert.equal(submitted.code, 0, submitted.stderr);
    const id = (JSON.parse(submitted.stdout) as DeployRecord).id;
    const promoted = new Set<string>();
    let promoting = Promise.resolve();
    const r = await runInTerminal(`manent --server ${server.url} status ${id} --watch`, {
      cwd: ws.dir,
      env,
      // At each pause the screen shows, promote it once (as a person reading it would), from the API.
      onOutput: (output) => {
        if (!lastDrawing(output).includes("paused until promoted")) return;
        promoting = promoting.then(async () => {
          const d = await server.api.deploy(id);
          const step = d.rollout?.waiting?.kind === "pause" ? d.rollout.waiting.step : undefined;
          if (step === undefined || promoted.has(step)) return;
          promoted.add(step);
          await server.api.rolloutCommand(id, "promote");
        });
      },
    });
    await promoting;
    assert.equal(r.code, 0, r.output);
    assert.equal(promoted.size, 2, `one pause per wave: ${[...promoted].join(", ")}`);
    // Redrawn in place: the cursor hidden, moved up over the last drawing and the rest erased, many times; shown again at the end.
    assert.ok(r.output.startsWith("\x1b[?25l") || r.output.includes("\x1b[?25l"), "cursor not hidden");
    assert.ok((r.output.match(/\x1b\[\d+A\r\x1b\[J/g) ?? []).length >= 3, "not redrawn in place");
    assert.ok(r.output.trimEnd().endsWith("\x1b[?25h"), "cursor not shown again");
    assert.match(r.output, /paused until promoted/, "a pause was never on screen");
    const view = lastDrawing(r.output);
    assert.match(view, new RegExp(`^deploy of live 2\\.0\\.0 → prod {2}\\[${id}\\]$`, "m"));
    assert.match(view, /^ {2}Status: +succeeded$/m);
    for (const step of ["resolve", "fetch", "validate", "deploy"])
      assert.match(view, new RegExp(`^ {2}✓ +${step} +succeeded +\\d+ms`, "m"));
    assert.match(view, /^WAVES\n {2}1\/2 +region=eu +succeeded +1 of 1 targets\n {2}2\/2 +region=us +succeeded +1 of 1 targets$/m);
    assert.match(view, /^CANARY \(wave 2\)\n {2}.*weight 100%, promoted$/m);
    assert.match(view, /candidate \[█{20}\] stable/);
    assert.match(view, /^TARGETS\n {2}HOST +PHASE +STATUS/m);
    for (const host of ["live-eu", "live-us"]) assert.match(view, new RegExp(`^ {2}${host} +deploy +deployed`, "m"));
    assert.equal(view.trimEnd().split("\n").at(-1), "succeeded");
    // Colour on a terminal: the status words.
    assert.match(r.output, /\x1b\[32msucceeded\x1b\[39m/);
  });

  /** Envconfigs of dev, staging and prod (noop) and the pipeline of `name`; started with --no-wait, its id. */
  const release = async (name: string, stages: unknown[]): Promise<string> => {
    for (const env of ["dev", "staging", "prod"]) {
      await ws.write(`envconfig/untenanted/${name}/${name}/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `${name}-${env}` }],
        params: { state_dir: ws.path("state") },
      });
    }
    await ws.write(`envconfig/untenanted/${name}/pipeline.yml`, { stages });
    const file = await ws.write(`${name}.yml`, descriptor(name, "dev", "dist/app.txt", "3.0.0"));
    const started = await shell(`manent --server ${server.url} release start -f ${file} --no-wait -o text`);
    assert.equal(started.code, 0, started.stderr);
    return started.stdout.trim();
  };

  it("release status --watch redraws the release's stages in place (soak time left), promoted when the screen asks, and leaves the final view", async () => {
    const id = await release("rel", [
      { environment: "dev" },
      { environment: "staging", soak: "2s" },
      { environment: "prod", promotion: "manual" },
    ]);
    let promoting: Promise<unknown> | undefined;
    const r = await runInTerminal(`manent --server ${server.url} release status ${id} --watch`, {
      cwd: ws.dir,
      env,
      // When the screen says the release waits for a promotion, promote it once (as a person reading it would).
      onOutput: (output) => {
        if (promoting || !lastDrawing(output).includes(`waiting for promotion: manent release promote ${id} --to prod`)) return;
        promoting = server.api.releaseCommand(id, "promote", "prod");
      },
    });
    assert.ok(promoting, "the promotion was never on screen");
    await promoting;
    assert.equal(r.code, 0, r.output);
    assert.ok(r.output.includes("\x1b[?25l"), "cursor not hidden");
    assert.ok((r.output.match(/\x1b\[\d+A\r\x1b\[J/g) ?? []).length >= 3, "not redrawn in place");
    assert.ok(r.output.trimEnd().endsWith("\x1b[?25h"), "cursor not shown again");
    assert.match(stripVTControlCharacters(r.output), /soak until \S+ \(\d+ s left\)/, "the soak's time left was never on screen");
    const view = lastDrawing(r.output);
    assert.match(view, new RegExp(`^release ${id}: rel 3\\.0\\.0 \\(rel\\)$`, "m"));
    assert.match(view, /^ {2}Status: +succeeded$/m);
    assert.match(view, /^ {2}1\. dev +succeeded {2}deploy [0-9a-f-]{36} succeeded$/m);
    assert.match(view, /^ {2}2\. staging +succeeded {2}deploy [0-9a-f-]{36} succeeded; soak until \S+$/m);
    assert.match(view, /^ {2}3\. prod +succeeded {2}deploy [0-9a-f-]{36} succeeded; promoted by /m);
    assert.equal(view.trimEnd().split("\n").at(-1), "succeeded");
    assert.match(r.output, /\x1b\[32msucceeded\x1b\[39m/, "status words coloured on a terminal");
  });

  it("release status --watch in a pipe prints one plain line per change, then the status", async () => {
    const id = await release("relpipe", [{ environment: "dev" }, { environment: "staging" }]);
    const r = await shell(`manent --server ${server.url} release status ${id} --watch -o text | cat`);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /\x1b/);
    const lines = r.stdout.trimEnd().split("\n");
    assert.equal(lines[0], `release ${id}: relpipe 3.0.0 (relpipe)`);
    for (const line of [/^1\. dev: deploy [0-9a-f-]{36} to dev succeeded$/, /^2\. staging: succeeded$/])
      assert.ok(
        lines.some((l) => line.test(l)),
        `${String(line)} in:\n${r.stdout}`,
      );
    assert.equal(new Set(lines).size, lines.length, "each line once");
    assert.equal(lines.at(-1), "succeeded");
  });

  it("deploy prints a timeline (coloured on a terminal, never redrawn); status --watch in a pipe prints it with no escape sequences", async () => {
    const file = await app("piped");
    const t = await runInTerminal(`manent --server ${server.url} deploy -f ${file}`, { cwd: ws.dir, env });
    assert.equal(t.code, 0, t.output);
    assert.doesNotMatch(t.output, /\x1b\[\d+A/, "deploy's timeline is not redrawn");
    assert.match(t.output, /\x1b\[32m✓\x1b\[39m deploy \(\d+ms\)/);
    const timeline = stripVTControlCharacters(t.output).replace(/\r\n/g, "\n").trimEnd().split("\n");
    assert.match(timeline[0]!, /^deploy of piped 2\.0\.0 → prod {2}\[[0-9a-f-]{36}\]$/);
    assert.equal(timeline.at(-1), "succeeded");

    const id = /\[([0-9a-f-]{36})\]/.exec(timeline[0]!)![1]!;
    const r = await shell(`manent --server ${server.url} status ${id} --watch -o text | cat`);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /\x1b/);
    const lines = r.stdout.trimEnd().split("\n");
    assert.ok(
      lines.some((l) => /^ {2}✓ deploy \(\d+ms\)$/.test(l)),
      r.stdout,
    );
    assert.equal(lines.at(-1), "succeeded");
  });

  it("colours status words on a terminal, not with NO_COLOR or --no-color; status shows the whole view once", async () => {
    const file = await app("colours");
    const d = JSON.parse((await shell(`manent --server ${server.url} deploy -f ${file}`)).stdout) as DeployRecord;
    assert.equal(d.status, "succeeded");
    const coloured = await runInTerminal(`manent --server ${server.url} status ${d.id}`, { cwd: ws.dir, env });
    assert.equal(coloured.code, 0, coloured.output);
    assert.match(coloured.output, colour);
    const view = stripVTControlCharacters(coloured.output).replace(/\r\n/g, "\n");
    assert.match(view, /^ {2}Status: +succeeded$/m);
    assert.match(view, /^TARGETS$/m);
    assert.doesNotMatch(coloured.output, /\x1b\[\d+A/, "a finished deploy's status is drawn once, not redrawn");
    for (const [what, line, extra] of [
      ["NO_COLOR", `manent --server ${server.url} status ${d.id}`, { NO_COLOR: "1" }],
      ["--no-color", `manent --server ${server.url} --no-color status ${d.id}`, {}],
    ] as const) {
      const plain = await runInTerminal(line, { cwd: ws.dir, env: { ...env, ...extra } });
      assert.equal(plain.code, 0, plain.output);
      assert.doesNotMatch(plain.output, colour, `colour despite ${what}`);
      assert.match(plain.output, /Status: +succeeded/);
    }
    // An empty NO_COLOR is unset (no-color.org).
    assert.match(
      (await runInTerminal(`manent --server ${server.url} status ${d.id}`, { cwd: ws.dir, env: { ...env, NO_COLOR: "" } })).output,
      colour,
    );
  });

  it("-o yaml prints the same document as -o json; -o wide adds columns to tables", async () => {
    const file = await app("formats");
    const asYaml = await shell(`manent --server ${server.url} deploy -f ${file} -o yaml`);
    assert.equal(asYaml.code, 0, asYaml.stderr);
    const deployed = parseYaml(asYaml.stdout) as DeployRecord;
    assert.equal(deployed.status, "succeeded");
    const json = JSON.parse((await shell(`manent --server ${server.url} status ${deployed.id} -o json`)).stdout) as unknown;
    assert.deepEqual(parseYaml((await shell(`manent --server ${server.url} status ${deployed.id} -o yaml`)).stdout), json);
    const history = parseYaml(
      (await shell(`manent --server ${server.url} history --application formats -o yaml`)).stdout,
    ) as DeployRecord[];
    assert.deepEqual(
      history.map((h) => h.id),
      [deployed.id],
    );

    const text = (await shell(`manent --server ${server.url} history --application formats -o text`)).stdout.trimEnd().split("\n");
    const wide = (await shell(`manent --server ${server.url} history --application formats -o wide`)).stdout.trimEnd().split("\n");
    assert.deepEqual(text[0]!.split("\t"), ["CREATED", "ID", "KIND", "APPLICATION", "ENVIRONMENT", "VERSION", "STATUS"]);
    const header = wide[0]!.split("\t");
    assert.deepEqual(header.slice(0, 7), text[0]!.split("\t"));
    assert.deepEqual(header.slice(7), ["TENANT", "ARTIFACT", "PLUGIN", "SUBMITTED_BY", "STARTED", "FINISHED", "ENVCONFIG", "ERROR"]);
    const row = Object.fromEntries(header.map((h, i) => [h, wide[1]!.split("\t")[i]]));
    assert.equal(row.ID, deployed.id);
    assert.equal(row.PLUGIN, "noop");
    assert.equal(row.FINISHED, deployed.finished_at);
    const plugins = (await shell(`manent --server ${server.url} plugins -o wide`)).stdout.split("\n");
    assert.deepEqual(plugins[0]!.split("\t").slice(0, 3), ["NAME", "KIND", "STATUS"]);
  });

  it("aligns tables in columns on a terminal, as kubectl does, and keeps tabs in a pipe", async () => {
    const file = await app("aligned-table-with-a-long-name");
    assert.equal((await shell(`manent --server ${server.url} deploy -f ${file} -o json`)).code, 0);
    for (const command of ["history", "history -o wide", "plugins -o wide", "audit"]) {
      const t = await runInTerminal(`manent --server ${server.url} ${command}`, { cwd: ws.dir, env });
      assert.equal(t.code, 0, t.output);
      const lines = stripVTControlCharacters(t.output)
        .split(/\r?\n/)
        .filter((l) => l.trim() !== "");
      assert.ok(lines.length >= 2, t.output);
      assert.ok(
        lines.every((l) => !l.includes("\t")),
        `${command}: no tab on a terminal`,
      );
      // Every column of the header starts where that column starts in each row (cells hold no double space).
      const starts = (l: string) => [...l.matchAll(/(?:^|(?<=\s{2}))\S/g)].map((m) => m.index);
      const header = starts(lines[0]!);
      for (const line of lines.slice(1)) {
        const cells = starts(line);
        assert.deepEqual(
          cells.slice(0, header.length - 1),
          header.slice(0, cells.length).slice(0, header.length - 1),
          `${command}:\n${lines.join("\n")}`,
        );
      }
    }
    const piped = (await shell(`manent --server ${server.url} history -o text | head -2`)).stdout;
    assert.match(piped, /^CREATED\tID\tKIND\t/);
  });

  it("manent version shows the CLI's and the server's versions, and says so when the server cannot be reached", async () => {
    const { version } = (await import("../../package.json", { with: { type: "json" } })).default;
    const both = await shell(`manent --server ${server.url} version -o text`);
    assert.equal(both.code, 0, both.stderr);
    assert.equal(both.stdout, `client: manent ${version}\nserver: manent-server ${version} at ${server.url}\n`);
    const doc = JSON.parse((await shell(`manent --server ${server.url} version`)).stdout) as unknown;
    assert.deepEqual(doc, { client: { version }, server: { address: server.url, version, api: "v1" } });

    // A port nothing listens on: taken, then closed.
    const closed = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const away = await shell(`manent --server http://127.0.0.1:${closed} version -o text`);
    assert.equal(away.code, 3);
    assert.equal(away.stdout.split("\n")[0], `client: manent ${version}`);
    assert.match(
      away.stdout.split("\n")[1]!,
      new RegExp(`^server: unknown — cannot reach manent-server at http://127\\.0\\.0\\.1:${closed} \\(ECONNREFUSED\\); is it running\\?`),
    );
    const awayDoc = JSON.parse((await shell(`manent --server http://127.0.0.1:${closed} version`)).stdout) as {
      server: { error: { code: string } };
    };
    assert.equal(awayDoc.server.error.code, "unavailable");
  });
});
