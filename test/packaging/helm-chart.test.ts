import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { parse } from "yaml";
import { loadManentConfig } from "../../src/core/config/index.js";
import type { KubeObj } from "../support/kube/kube-client.js";
import { repoRoot } from "../support/server-process.js";
import { findHelm } from "../plugins/kubernetes/find-helm.js";

const run = promisify(execFile);
const chart = join(repoRoot, "packaging/helm/manent-server");
const values = [
  ["database.existingSecret", "manent-db"],
  ["tokens[0].name", "ci"],
  ["tokens[0].role", "deployer"],
  ["tokens[0].existingSecret", "manent-tokens"],
  ["tokens[0].key", "ci"],
  ["replicaCount", "3"],
].flatMap(([k, v]) => ["--set", `${k}=${v}`]);

/** The Helm chart of packaging/helm: helm lint, and the manent.yml and objects it renders. */
describe("the Helm chart (packaging/helm/manent-server)", () => {
  const helm = findHelm();
  let dir: string;

  before(async () => {
    assert.ok(helm, "helm: run scripts/ci/kubernetes.sh");
    dir = await mkdtemp(join(tmpdir(), "manent-chart-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function helmRun(args: string[]): Promise<{ code: number; out: string }> {
    const r = await run(helm!, args, {
      env: {
        ...process.env,
        KUBECONFIG: join(dir, "kubeconfig"),
        HELM_CACHE_HOME: join(dir, "cache"),
        HELM_CONFIG_HOME: join(dir, "config"),
        HELM_DATA_HOME: join(dir, "data"),
      },
    }).then(
      (r) => ({ code: 0, out: r.stdout + r.stderr }),
      (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }),
    );
    return r;
  }

  it("passes helm lint, and refuses values without a database Secret or a token, naming the value", async () => {
    const lint = await helmRun(["lint", chart, ...values]);
    assert.equal(lint.code, 0, lint.out);
    // helm lint only reports a template's fail() as [INFO]: helm template (and install) stop on it.
    const noDb = await helmRun(["template", "manent", chart]);
    assert.notEqual(noDb.code, 0);
    assert.match(noDb.out, /database\.existingSecret: name the Secret holding the Postgres URL/);
    const noToken = await helmRun(["template", "manent", chart, "--set", "database.existingSecret=db"]);
    assert.notEqual(noToken.code, 0);
    assert.match(noToken.out, /tokens: give at least one API token/);
  });

  it("renders a manent.yml the server accepts: secrets by reference only, workdir on the emptyDir", async () => {
    const rendered = await helmRun(["template", "manent", chart, ...values, "--set", "config.concurrency=20"]);
    assert.equal(rendered.code, 0, rendered.out);
    const objects = rendered.out
      .split(/^---$/m)
      .map((d) => parse(d) as KubeObj | null)
      .filter((o): o is KubeObj => !!o);
    const configMap = objects.find((o) => o.kind === "ConfigMap")!;
    const file = join(dir, "manent.yml");
    await writeFile(file, (configMap.data as Record<string, string>)["manent.yml"]!);
    const config = await loadManentConfig(file);
    assert.equal(config.dbos.database_url, "env:MANENT_DATABASE_URL");
    assert.equal(config.listen, "0.0.0.0:8080");
    assert.equal(config.workdir, "/var/lib/manent");
    assert.equal(config.concurrency, 20);
    assert.deepEqual(
      config.auth.tokens.map((t) => [t.name, t.role, t.tenant]),
      [["ci", "deployer", "*"]],
    );
    assert.doesNotMatch(rendered.out, /postgres:\/\//);
  });

  it("refuses envconfig paths that are not tenant/application/artifact/environment.yml of plain names, and RBAC or anti-affinity values it cannot honour", async () => {
    for (const path of [
      "../etc/passwd.yml",
      "team-a/hello/../../x.yml",
      "team-a/hello/hello/.yml",
      "team-a/hello/hello",
      "a/b/c/d/e.yml",
      "/abs/b/c/d.yml",
    ]) {
      const r = await helmRun([
        "template",
        "manent",
        chart,
        ...values,
        "--set-string",
        `envconfig.files.${path.replace(/\./g, "\\.")}=plugin: noop`,
      ]);
      assert.notEqual(r.code, 0, path);
      assert.match(r.out, /envconfig: ".*" is not a path tenant\/application\/artifact\/environment\.yml of plain names/, path);
    }
    const item = await helmRun([
      "template",
      "manent",
      chart,
      ...values,
      "--set",
      "envconfig.existingConfigMap.name=cm",
      "--set",
      "envconfig.existingConfigMap.items[0].key=k",
      "--set",
      "envconfig.existingConfigMap.items[0].path=../../k.yml",
    ]);
    assert.notEqual(item.code, 0);
    assert.match(item.out, /envconfig: "\.\.\/\.\.\/k\.yml" is not a path/);
    const rbac = await helmRun(["template", "manent", chart, ...values, "--set", "rbac.create=true"]);
    assert.notEqual(rbac.code, 0);
    assert.match(rbac.out, /rbac\.namespaces: name the namespaces the kubernetes plugin deploys into/);
    const spread = await helmRun(["template", "manent", chart, ...values, "--set", "podAntiAffinity=always"]);
    assert.notEqual(spread.code, 0);
    assert.match(spread.out, /podAntiAffinity: "always" is not soft, hard or ""/);
  });

  it("renders a manent.yml whose envconfig provider reads the files the chart mounts, unless config.envconfig names its own", async () => {
    const rendered = await helmRun(["template", "manent", chart, ...values]);
    assert.equal(rendered.code, 0, rendered.out);
    const configMap = rendered.out
      .split(/^---$/m)
      .map((d) => parse(d) as KubeObj | null)
      .find((o) => o?.kind === "ConfigMap")!;
    const file = join(dir, "default.yml");
    await writeFile(file, (configMap.data as Record<string, string>)["manent.yml"]!);
    const config = await loadManentConfig(file);
    assert.equal(config.envconfig.required, true);
    assert.deepEqual(
      config.envconfig.providers.map((p) => [p.type, "file" in p ? p.file.path : p.git.path]),
      [["file", "/etc/manent/envconfig/{tenant}/{application}/{artifact}/{environment}.yml"]],
    );
    const own = await helmRun([
      "template",
      "manent",
      chart,
      ...values,
      "--set",
      "config.envconfig.providers[0].name=mine",
      "--set",
      "config.envconfig.providers[0].type=file",
      "--set",
      "config.envconfig.providers[0].file.path=/srv/{tenant}/{application}/{artifact}/{environment}.yml",
    ]);
    assert.equal(own.code, 0, own.out);
    const ownConfig = own.out
      .split(/^---$/m)
      .map((d) => parse(d) as KubeObj | null)
      .find((o) => o?.kind === "ConfigMap")!;
    await writeFile(file, (ownConfig.data as Record<string, string>)["manent.yml"]!);
    assert.deepEqual(
      (await loadManentConfig(file)).envconfig.providers.map((p) => [p.name, "file" in p ? p.file.path : p.git.path]),
      [["mine", "/srv/{tenant}/{application}/{artifact}/{environment}.yml"]],
    );
  });
});
