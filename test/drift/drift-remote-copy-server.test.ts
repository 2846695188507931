import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { TargetDriftRecord } from "../../src/core/drift/drift-record.js";
import { CallbackReceiver } from "../support/callback-receiver.js";
import { driftEvent } from "../support/drift-events.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { startSshHosts, type SshHosts } from "../support/sshd/index.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";
import { makeTarball } from "../plugins/remote-copy/helpers.js";

const sha = (text: string): string => createHash("sha256").update(text).digest("hex");

/**
 * Periodic drift checks of a real manent-server with the remote-copy plugin over real sshd: an
 * environment with `drift.interval` reports a file changed on a target by hand (target and file),
 * counts it in the metric, calls back, and with `heal` on redeploys the recorded release.
 */
describe("drift of remote-copy targets over SSH, checked by the server at an interval", () => {
  let hosts: SshHosts;
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let receiver: CallbackReceiver;
  let base: string;

  const envconfig = async (heal: boolean) => {
    const server0 = hosts.servers[0]!;
    await ws.write("envconfig/untenanted/site/site/prod.yml", {
      plugin: "remote-copy",
      targets: [{ host: server0.host, port: server0.port }],
      params: { transport: "ssh", base, user: hosts.user.name, known_hosts_secret: "known-hosts", connect_timeout: "10s" },
      secrets: [
        { name: "ssh-key", ref: `file:${ws.path("ssh/key")}` },
        { name: "known-hosts", ref: `file:${ws.path("ssh/known_hosts")}` },
      ],
      drift: { interval: "1s", heal },
      callbacks: [{ url: receiver.url, events: ["drifted"] }],
    });
  };

  before(async () => {
    hosts = await startSshHosts(1);
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    receiver = new CallbackReceiver();
    await receiver.start("/drift");
    await ws.write("ssh/key", hosts.userKey.privateKey);
    await ws.write("ssh/known_hosts", hosts.knownHosts);
    base = join(await hosts.ownedDir("site"), "{host}");
    const yml = manentYml(await pg.createDatabase(), { plugins: { "remote-copy": {} } });
    server = await startServer(await ws.write("manent.yml", yml), { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await receiver?.stop();
    await pg?.stop();
    await hosts?.close();
  });

  it("reports a file changed on the target within its interval, naming target and file; counts it, calls back, and heals it", async () => {
    await envconfig(false);
    const tarball = await makeTarball(ws.dir, "1.0.0");
    const { id } = await server.api.submit({
      descriptor: {
        apiVersion: "manent/v1",
        application: "site",
        environment: "prod",
        artifact: { type: "tarball", name: "site", version: "1.0.0", source: tarball.path },
      },
      descriptor_file: "site.yml",
    });
    const deployed = await server.api.deploy(id, 120);
    assert.equal(deployed.status, "succeeded", JSON.stringify(deployed.error));
    const host = hosts.servers[0]!.host;
    const first = await driftEvent(server.api, "site", (ts) => ts.length === 1 && ts[0]!.state === "in_sync");
    assert.deepEqual(
      first.targets.map((t) => [t.target, t.deploy_id, t.live_version]),
      [[host, id, "1.0.0"]],
    );

    // Someone edits a file of the live release on the host.
    const file = join(base.replace("{host}", host), "current", "app.txt");
    await writeFile(file, "patched by hand");
    const found = await driftEvent(server.api, "site", (ts) => ts[0]?.state === "drifted", first.id);
    assert.deepEqual(found.targets[0]!.changes, [
      { object: "app.txt", field: "sha256", expected: sha("1.0.0"), live: sha("patched by hand") },
    ]);
    assert.equal(found.targets[0]!.target, host);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /^manent_drifted_targets\{tenant="untenanted",application="site",environment="prod"\} 1$/m);
    const called = await receiver.waitFor((p) => p.event === "drifted" && p.deploy.application === "site");
    assert.deepEqual(
      (called.drift!.targets as TargetDriftRecord[]).map((t) => [t.target, t.state, t.changes.map((c) => c.object)]),
      [[host, "drifted", ["app.txt"]]],
    );

    // Heal turned on: the server redeploys the recorded release, and the file is the release's again.
    await envconfig(true);
    const healed = await driftEvent(server.api, "site", (ts) => ts[0]?.state === "in_sync", found.id);
    assert.equal(healed.targets[0]!.target, host);
    assert.equal(await readFile(file, "utf8"), "1.0.0");
    const { deploys } = await server.api.list({ application: "site" });
    const heal = deploys.find((d) => d.submitted_by === "manent drift heal");
    assert.ok(heal, JSON.stringify(deploys));
    assert.deepEqual([heal.version, heal.status], ["1.0.0", "succeeded"]);
    const after = await (await fetch(`${server.url}/metrics`)).text();
    assert.doesNotMatch(after, /^manent_drifted_targets\{tenant="untenanted",application="site",environment="prod"\} [1-9]/m);
  });
});
