import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { envconfigSchema } from "../../src/core/config/envconfig.js";
import { parseYaml } from "../../src/core/config/yaml-file.js";
import { formatFieldPath, parseFieldPath, pathCovers } from "../../src/core/contract/index.js";
import { Code, ManentError } from "../../src/core/errors.js";

const file = "envconfig/acme/shop/shop/prod.yml";

function load(ignore: string): ReturnType<typeof envconfigSchema.parse> {
  return parseYaml(`plugin: kubernetes\ndrift:\n  interval: 5m\n  ignore:\n${ignore}`, file, envconfigSchema);
}

function refused(ignore: string, field: string, reason: RegExp): void {
  assert.throws(
    () => load(ignore),
    (err: unknown) => {
      assert.ok(err instanceof ManentError, String(err));
      assert.equal(err.code, Code.InvalidArgument);
      assert.equal(err.details.file, file);
      assert.equal(err.details.field, field, err.message);
      assert.ok(err.message.startsWith(`${file}: ${field}: `), err.message);
      assert.match(err.message, reason);
      return true;
    },
  );
}

describe("drift.ignore in the envconfig", () => {
  it("loads kinds, names, field paths and managers; fields and managers default to none; no list is an empty one", () => {
    const e = load(`    - {kind: Deployment, group: apps, name: hello, fields: [spec.replicas]}
    - kind: "*"
      managers: [kube-controller-manager]
    - kind: ConfigMap
      namespace: shop
      fields: ['metadata.annotations["example.com/owner"]', "spec.template.spec.containers[*].image", "data[0]"]
`);
    assert.deepEqual(e.drift.ignore, [
      { kind: "Deployment", group: "apps", name: "hello", fields: ["spec.replicas"], managers: [] },
      { kind: "*", fields: [], managers: ["kube-controller-manager"] },
      {
        kind: "ConfigMap",
        namespace: "shop",
        fields: ['metadata.annotations["example.com/owner"]', "spec.template.spec.containers[*].image", "data[0]"],
        managers: [],
      },
    ]);
    assert.deepEqual(parseYaml("plugin: noop\n", file, envconfigSchema).drift.ignore, []);
  });

  it("refuses a bad entry naming the file, the field and why", () => {
    refused("    - {kind: Deployment}\n", "drift.ignore.0", /names no fields and no managers/);
    refused("    - {fields: [spec.replicas]}\n", "drift.ignore.0.kind", /is required/);
    refused("    - {kind: deployment, fields: [spec.replicas]}\n", "drift.ignore.0.kind", /must be a Kubernetes kind/);
    refused("    - {kind: Deployment, group: Apps/v1, fields: [x]}\n", "drift.ignore.0.group", /must be an API group/);
    refused(
      "    - {kind: Deployment, fields: [spec..replicas]}\n",
      "drift.ignore.0.fields.0",
      /"spec\.\.replicas" is not a field path: expected a name, found "\." at character 6/,
    );
    refused(
      "    - {kind: Deployment, fields: [spec.replicas, 'a[x]']}\n",
      "drift.ignore.0.fields.1",
      /expected an index, "\*" or a quoted key in brackets/,
    );
    refused("    - {kind: Deployment, fields: ['']}\n", "drift.ignore.0.fields.0", /it is empty/);
    refused("    - {kind: Deployment, fields: [.spec]}\n", "drift.ignore.0.fields.0", /it starts with "\."/);
    refused(
      "    - {kind: Deployment, fields: ['/spec/replicas']}\n",
      "drift.ignore.0.fields.0",
      /"\/spec\/replicas" is not a field path: it is a JSON pointer: write "spec.replicas"/,
    );
    refused("    - {kind: Deployment, managers: ['']}\n", "drift.ignore.0.managers.0", /at least 1 character|too small/i);
    refused("    - {kind: Deployment, fields: [x], label: y}\n", "drift.ignore.0", /label/);
  });
});

describe("field paths", () => {
  it("parse names, indexes, quoted keys and [*], and print back as drift shows them", () => {
    for (const p of [
      "spec.replicas",
      "spec.template.spec.containers[0].image",
      'metadata.annotations["example.com/a.b"]',
      "items[*].name",
      '["a]b"].c',
    ]) {
      assert.equal(formatFieldPath(parseFieldPath(p)), p);
    }
    assert.deepEqual(parseFieldPath('a["x\\"y"][3]'), [{ key: "a" }, { key: 'x"y' }, { index: 3 }]);
    for (const bad of ["a.", "a[0]b", "a[01]", "a[", 'a["x"', "a b"]) assert.throws(() => parseFieldPath(bad), /is not a field path/, bad);
  });

  it("a path covers itself and what is under it; [*] is any one index or key", () => {
    const covers = (pattern: string, path: string) => pathCovers(parseFieldPath(pattern), parseFieldPath(path));
    assert.ok(covers("spec.replicas", "spec.replicas"));
    assert.ok(covers("spec.template", "spec.template.spec.containers[0].image"));
    assert.ok(covers("spec.template.spec.containers[*].image", "spec.template.spec.containers[2].image"));
    assert.ok(covers("metadata.annotations[*]", 'metadata.annotations["example.com/x"]'));
    assert.ok(!covers("spec.replicas", "spec"));
    assert.ok(!covers("spec.replicas", "spec.replicasX"));
    assert.ok(!covers("spec.template.spec.containers[0].image", "spec.template.spec.containers[1].image"));
  });
});
