import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { helloManifest } from "../plugins/kubernetes/helpers.js";
import { runCli, startServer, type CliResult, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

/**
 * `--dry-run` runs the checks the rollout will need against the plugin (issue 22, defects 5 and
 * 4): the plugin's validate receives what the canary will ask (Request.rollout), so a setting it
 * lacks fails the dry-run at validation instead of the deploy at prepare_slots or route_testers.
 * Through the real CLI and manent-server, with the built-in remote-copy and kubernetes plugins;
 * every refusal happens before a target is touched (no cluster is needed to refuse).
 */
describe("dry-run checks the rollout's settings", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;

  const cli = (...args: string[]): Promise<CliResult> => runCli(args, { cwd: ws.dir, server: server.url });
  const descriptorFile = (name: string, type: string, source: string) =>
    ws.write(`${name}.yml`, {
      apiVersion: "manent/v1",
      application: name,
      environment: "test",
      artifact: { type, name, version: "1.0.0", source },
    });
  const remoteCopy = async (name: string, params: Record<string, string>, canary: Record<string, unknown>) => {
    await ws.write(`envconfig/untenanted/${name}/${name}/test.yml`, {
      plugin: "remote-copy",
      targets: [{ host: "web-1" }, { host: "web-2" }],
      params: { transport: "local", base: ws.path("hosts", name, "{host}"), ...params },
      rollout: { canary },
    });
    return descriptorFile(name, "file", "dist/app.txt");
  };
  const dryRun = async (file: string): Promise<DeployRecord> => {
    const r = await cli("deploy", "-f", file, "--dry-run", "-o", "json");
    assert.equal(r.code, 1, `a failed dry-run exits 1; stdout: ${r.stdout} stderr: ${r.stderr}`);
    return JSON.parse(r.stdout) as DeployRecord;
  };
  const failedStep = (d: DeployRecord) => d.steps.find((s) => s.status === "failed")?.name;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    await ws.write("dist/app.txt", "one\n");
    await ws.write("k8s/hello.yaml", helloManifest);
    await ws.write("k8s/token", "not-used\n");
    const config = await ws.write("manent.yml", manentYml(await pg.createDatabase(), { plugins: { "remote-copy": {}, kubernetes: {} } }));
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("remote-copy without slot_ports: the dry-run fails at validation, naming the param and the target", async () => {
    const file = await remoteCopy("noslots", {}, { steps: [{ pause: { duration: "1s" } }] });
    const d = await dryRun(file);
    assert.equal(d.status, "failed");
    assert.equal(failedStep(d), "validate");
    assert.match(
      d.error!.message,
      /remote-copy: param slot_ports: target web-1 has no slots \(param or label slot_ports, e\.g\. blue=8081,green=8082\), which the envconfig's rollout\.canary needs/,
    );
    // The deploy itself is refused at the same point, before its checkpoint: nothing is touched.
    const r = await cli("deploy", "-f", file, "-o", "json");
    assert.equal(r.code, 1, r.stderr);
    const real = JSON.parse(r.stdout) as DeployRecord;
    assert.equal(failedStep(real), "validate");
    assert.equal(existsSync(ws.path("hosts", "noslots")), false, "a target was touched");
  });

  it("remote-copy with slots but set_weight steps and no HAProxy: the dry-run names haproxy_socket", async () => {
    const file = await remoteCopy("noweights", { slot_ports: "blue=18081,green=18082" }, { steps: [{ set_weight: 20 }] });
    const d = await dryRun(file);
    assert.equal(failedStep(d), "validate");
    assert.match(d.error!.message, /remote-copy: param haproxy_socket: the envconfig's rollout\.canary sets weights/);
  });

  it("remote-copy with testers and no tester backend: the dry-run names haproxy_tester_backend", async () => {
    const file = await remoteCopy(
      "notesters",
      { slot_ports: "blue=18081,green=18082" },
      { testers: true, steps: [{ pause: { duration: "1s" } }] },
    );
    const d = await dryRun(file);
    assert.equal(failedStep(d), "validate");
    assert.match(d.error!.message, /remote-copy: param haproxy_tester_backend: the envconfig's rollout\.canary\.testers/);
  });

  it("kubernetes with testers: true and no traffic_route: the dry-run fails at validation", async () => {
    await ws.write("envconfig/untenanted/kroute/kroute/test.yml", {
      plugin: "kubernetes",
      // Nothing listens here: the refusal comes before any cluster call.
      targets: [{ host: "127.0.0.1", port: 1 }],
      params: { namespace: "hello", token_secret: "kube-token" },
      secrets: [{ name: "kube-token", ref: `file:${ws.path("k8s/token")}` }],
      rollout: { canary: { testers: true, steps: [{ set_weight: 50 }] } },
    });
    const d = await dryRun(await descriptorFile("kroute", "kubernetes", "k8s/hello.yaml"));
    assert.equal(failedStep(d), "validate");
    assert.match(
      d.error!.message,
      /kubernetes: param traffic_route: the envconfig's rollout\.canary\.testers routes testers to the candidate through a Gateway API HTTPRoute: set param traffic_route/,
    );
  });

  it("a canary whose settings the plugin has passes validation (the dry-run then checks the targets)", async () => {
    const file = await remoteCopy("fine", { slot_ports: "blue=18081,green=18082" }, { steps: [{ pause: { duration: "1s" } }] });
    const r = await cli("deploy", "-f", file, "--dry-run", "-o", "json");
    assert.equal(r.code, 0, `stdout: ${r.stdout} stderr: ${r.stderr}`);
    const d = JSON.parse(r.stdout) as DeployRecord;
    assert.equal(d.steps.find((s) => s.name === "validate")!.status, "succeeded");
  });
});
