import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";
import { TestPostgres } from "../support/postgres.js";
import { ServerFixture, type StartedServer } from "../support/server-fixture.js";
import { gitEnvconfig, upstream } from "../support/git-upstream.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";

/**
 * Changes as releases: an environment whose envconfig (from a real git repository) asks for
 * `auto_deploy` gets a deploy of the release running there when its file changes on the ref;
 * others wait for someone to deploy. Once per content, and an envconfig the change breaks is
 * reported, not deployed.
 */
describe("auto-deploy on an envconfig change", () => {
  const fixture = new ServerFixture();
  let s: StartedServer;
  let api: ApiClient;
  let up: Awaited<ReturnType<typeof upstream>>;
  const token = "admin-token-0123456789abcdef";
  const shop = "untenanted/shop/shop/test.yml";
  const cart = "untenanted/cart/cart/test.yml";
  const envconfig = (hosts: string[], extra = "") =>
    `plugin: noop\ntargets: [${hosts.map((h) => `{host: ${h}}`).join(", ")}]\nparams: {state_dir: ${JSON.stringify(s.ws.path("state"))}}\n${extra}`;
  const release = (host: string) => readFile(s.ws.path("state", `${host}.release`), "utf8").catch(() => undefined);

  before(async () => {
    up = await upstream();
    await up.commit({ README: "envconfig\n" }, "empty");
    process.env.MANENT_TEST_AUTO_ADMIN = token;
    s = await fixture.start("hello\n", {
      envconfig: gitEnvconfig(`file://${up.bare}`),
      auth: { tokens: [{ name: "admin", tenant: "*", token: "env:MANENT_TEST_AUTO_ADMIN" }] },
    });
    api = new ApiClient(s.server.url, token);
  });
  after(() => fixture.stop());

  it("deploys the running release again with the new envconfig, once, only where the envconfig asks for it", async () => {
    const first = await up.commit({ [shop]: envconfig(["shop-1"], "auto_deploy: true\n"), [cart]: envconfig(["cart-1"]) }, "one");
    assert.deepEqual((await api.refreshEnvconfig()).auto_deploys, [], "a refresh with nothing deployed deploys nothing");
    for (const app of ["shop", "cart"]) {
      const d = await api.submit({ descriptor: descriptor(app, "test", s.artifact, "1.0.0"), descriptor_file: `${app}.yml` });
      assert.equal((await api.deploy(d.id, 60)).status, "succeeded");
    }
    assert.deepEqual((await api.refreshEnvconfig()).auto_deploys, [], "what runs has this envconfig already");

    const second = await up.commit(
      { [shop]: envconfig(["shop-1", "shop-2"], "auto_deploy: true\n"), [cart]: envconfig(["cart-1", "cart-2"]) },
      "two targets",
    );
    assert.notEqual(second, first);
    const refreshed = await api.refreshEnvconfig();
    assert.equal(refreshed.providers[0]!.after, second);
    assert.equal(refreshed.auto_deploys.length, 1, JSON.stringify(refreshed.auto_deploys));
    const auto = refreshed.auto_deploys[0]!;
    assert.deepEqual(
      { ...auto, deploy_id: typeof auto.deploy_id },
      {
        tenant: "untenanted",
        application: "shop",
        artifact: "shop",
        environment: "test",
        commit: second,
        sha256: auto.sha256,
        deploy_id: "string",
        error: null,
      },
    );
    const d = await api.deploy(auto.deploy_id!, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.version, "1.0.0", "the release running there, not a new version");
    assert.equal(d.submitted_by, "manent auto-deploy");
    assert.equal(d.envconfig?.commit, second);
    assert.equal(d.envconfig?.sha256, auto.sha256);
    assert.equal(await release("shop-2"), "1.0.0", "the new envconfig's target got the release");
    assert.equal(await release("cart-2"), undefined, "cart's envconfig does not ask for auto_deploy");

    // Cart runs behind the ref's head: the overview says so, and diff shows what a deploy would change.
    const overview = await api.overview({});
    const cell = (app: string) => overview.rows.find((r) => r.application === app)!.cells[0]!;
    assert.equal(cell("shop").envconfig?.state, "current");
    assert.deepEqual([cell("cart").envconfig?.state, cell("cart").envconfig?.head?.commit], ["behind", second]);
    assert.equal(cell("cart").envconfig?.deployed?.commit, first);
    const text = await runCli(["overview", "-o", "text"], { cwd: s.ws.dir, server: s.server.url, token });
    assert.match(
      text.stdout,
      new RegExp(`^  test +1\\.0\\.0 .*; envconfig behind the ref's head ${second.slice(0, 12)}: manent diff shows the change$`, "m"),
    );
    await s.ws.write("cart.yml", descriptor("cart", "test", s.artifact, "1.0.0"));
    const diff = await runCli(["diff", "-f", "cart.yml", "-o", "text"], { cwd: s.ws.dir, server: s.server.url, token });
    assert.equal(diff.code, 1, "cart-2, a target of the envconfig of now, runs nothing: drifted");
    assert.match(
      diff.stdout,
      new RegExp(
        `\nenvconfig: a new deploy changes 1 setting \\(git ${cart}@${first.slice(0, 12)} .* → git ${cart}@${second.slice(0, 12)} .*\\)\n  targets\\.cart-2\\.host: \\(absent\\) → cart-2\n$`,
      ),
    );

    // Once per content: the next refresh (here through the CLI, as an admin would) deploys nothing more.
    const cli = await runCli(["envconfig", "refresh", "-o", "text"], { cwd: s.ws.dir, server: s.server.url, token });
    assert.equal(cli.code, 0, cli.stderr);
    assert.doesNotMatch(cli.stdout, /auto-deploy/);
    // A commit that leaves shop's file as it is deploys nothing either.
    await up.commit({ [cart]: envconfig(["cart-1"]) }, "cart only");
    assert.deepEqual((await api.refreshEnvconfig()).auto_deploys, []);
  });

  it("reports an envconfig the change broke, naming its file and field, and does not deploy it", async () => {
    await up.commit({ [shop]: envconfig(["shop-1"], "auto_deploy: true\nparallel: 0\n") }, "broken");
    const cli = await runCli(["envconfig", "refresh", "-o", "text"], { cwd: s.ws.dir, server: s.server.url, token });
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(
      cli.stdout,
      new RegExp(`auto-deploy\\tuntenanted/shop/shop in test\\tnot submitted: the envconfig does not load: ${shop}: parallel`),
    );
    // A plugin that is not configured: the file loads, the deploy is refused, once for that content.
    const unknown = await up.commit(
      { [shop]: envconfig(["shop-1"], "auto_deploy: true\n").replace("plugin: noop", "plugin: nosuch") },
      "no such plugin",
    );
    const [refused] = (await api.refreshEnvconfig()).auto_deploys;
    assert.equal(refused?.commit, unknown);
    assert.equal(refused.deploy_id, null);
    assert.match(refused.error ?? "", new RegExp(`${shop}.*nosuch`));
    const before = (await api.list({ application: "shop" })).deploys.length;
    assert.deepEqual((await api.refreshEnvconfig()).auto_deploys, [], "refused once, not submitted at every refresh");
    assert.equal((await api.list({ application: "shop" })).deploys.length, before, "no deploy recorded");

    const fixed = await up.commit({ [shop]: envconfig(["shop-1"], "auto_deploy: true\nparallel: 2\n") }, "fixed");
    const [auto] = (await api.refreshEnvconfig()).auto_deploys;
    assert.equal(auto?.commit, fixed);
    assert.equal((await api.deploy(auto.deploy_id!, 60)).status, "succeeded");
  });
});

/** Two servers on one database, each with its own fetch of the repository: one auto-deploy between them. */
describe("auto-deploy in a fleet", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let up: Awaited<ReturnType<typeof upstream>>;
  const servers: ServerProcess[] = [];
  const file = "untenanted/fleet/fleet/test.yml";
  let pushTwoTargets: () => Promise<string>;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    up = await upstream();
    const databaseUrl = await pg.createDatabase();
    const body = (hosts: string[]) =>
      `plugin: noop\ntargets: [${hosts.map((h) => `{host: ${h}}`).join(", ")}]\nparams: {state_dir: ${JSON.stringify(ws.path("state"))}}\nauto_deploy: true\n`;
    await up.commit({ [file]: body(["fleet-1"]) }, "one");
    for (const executor of ["server-1", "server-2"]) {
      const config = await ws.write(
        `${executor}.yml`,
        manentYml(undefined, {
          dbos: { database_url: databaseUrl, executor_id: executor },
          workdir: `./work-${executor}`,
          envconfig: gitEnvconfig(`file://${up.bare}`),
        }),
      );
      servers.push(await startServer(config, { cwd: ws.dir }));
    }
    pushTwoTargets = () => up.commit({ [file]: body(["fleet-1", "fleet-2"]) }, "two");
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await pg?.stop();
  });

  it("submits the change once whichever servers refresh at the same time", async () => {
    const artifact = await ws.write("dist/app.txt", "fleet\n");
    const { id } = await servers[0]!.api.submit({
      descriptor: descriptor("fleet", "test", artifact, "2.0.0"),
      descriptor_file: "fleet.yml",
    });
    assert.equal((await servers[1]!.api.deploy(id, 60)).status, "succeeded");
    const next = await pushTwoTargets();
    const answers = await Promise.all(servers.map((s) => s.api.refreshEnvconfig()));
    assert.deepEqual(
      answers.map((a) => a.providers[0]!.after),
      [next, next],
      "each server fetched the new commit itself",
    );
    const submitted = answers.flatMap((a) => a.auto_deploys);
    assert.equal(submitted.length, 1, JSON.stringify(submitted));
    const d = await servers[1]!.api.deploy(submitted[0]!.deploy_id!, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.equal(d.envconfig?.commit, next);
    const { deploys } = await servers[0]!.api.list({ application: "fleet" });
    assert.equal(deploys.length, 2, "the deploy and its one auto-deploy");
  });
});
