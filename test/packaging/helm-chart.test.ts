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
});
