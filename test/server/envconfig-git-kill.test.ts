import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { gitHttpsServer } from "../support/git-https-server.js";
import { upstream } from "../support/git-upstream.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * A server SIGKILLed in the middle of a fetch (its pack half received from a real https git host),
 * as a node losing power would, with every process of it gone: the next start runs on the last good
 * commit even while the host is down, deploys with it, and fetches the new commit once the host is
 * back, whatever the killed fetch left in the repository.
 */
describe("git envconfig: kill -9 during a fetch", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let up: Awaited<ReturnType<typeof upstream>>;
  let host: Awaited<ReturnType<typeof gitHttpsServer>>;
  let server: ServerProcess | undefined;
  let config: string;
  let artifact: string;
  const token = "gitlab-token-0123456789abcdef";
  const file = "untenanted/shop/shop/test.yml";
  const envconfig = (hosts: string[]) =>
    `plugin: noop\ntargets: [${hosts.map((h) => `{host: ${h}}`).join(", ")}]\nparams: {state_dir: ${JSON.stringify(ws.path("state"))}}\n`;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    up = await upstream();
    host = await gitHttpsServer(up.bare, token);
    artifact = await ws.write("dist/app.txt", "kill\n");
    await writeFile(ws.path("git-ca.pem"), host.caPem);
    process.env.MANENT_TEST_KILL_GIT_TOKEN = token;
    config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        envconfig: {
          required: true,
          providers: [
            {
              name: "gitops",
              type: "git",
              git: {
                repository: host.url,
                token: "env:MANENT_TEST_KILL_GIT_TOKEN",
                ca_file: ws.path("git-ca.pem"),
                path: "{tenant}/{application}/{artifact}/{environment}.yml",
                interval: "1h",
              },
            },
          ],
        },
      }),
    );
  });
  after(async () => {
    await server?.stop();
    await host?.close();
    await pg?.stop();
    delete process.env.MANENT_TEST_KILL_GIT_TOKEN;
  });

  const deploy = async (version: string) => {
    const { id } = await server!.api.submit({ descriptor: descriptor("shop", "test", artifact, version), descriptor_file: "shop.yml" });
    const d = await server!.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    return d;
  };

  it("starts on the last good commit, deploys with it, and moves on once the host answers", async () => {
    const good = await up.commit({ [file]: envconfig(["shop-1"]) }, "one");
    server = await startServer(config, { cwd: ws.dir });
    assert.equal((await deploy("1.0.0")).envconfig?.commit, good);

    const next = await up.commit({ [file]: envconfig(["shop-1", "shop-2"]) }, "two");
    const held = host.hold();
    const refresh = server.api.refreshEnvconfig().catch((err: unknown) => err);
    const release = await held;
    // The server and its git processes die together, as in a container whose node is lost.
    await server.kill();
    try {
      execFileSync("pkill", ["-KILL", "-f", host.url.replace(/[.]/g, "\\.")], { stdio: "ignore" });
    } catch {
      // none left: git ended with the server
    }
    release();
    assert.ok((await refresh) instanceof Error, "the refresh asked for never answered");

    host.fail(true);
    server = await startServer(config, { cwd: ws.dir });
    const first = await server.logged(/envconfig provider gitops: .*(503|failed)/);
    assert.ok(!first.includes(token), first);
    const d = await deploy("1.1.0");
    assert.equal(d.envconfig?.commit, good, "the last good commit, not what the killed fetch left");
    assert.deepEqual([...new Set(d.targets.map((t) => t.host))], ["shop-1"]);

    host.fail(false);
    const { providers } = await server.api.refreshEnvconfig();
    assert.deepEqual([providers[0]!.before, providers[0]!.after, providers[0]!.error], [good, next, null]);
    const moved = await deploy("1.2.0");
    assert.equal(moved.envconfig?.commit, next);
    assert.deepEqual([...new Set(moved.targets.map((t) => t.host))].sort(), ["shop-1", "shop-2"]);
  });
});
