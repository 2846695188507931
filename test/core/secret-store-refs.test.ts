import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  envconfigSchema,
  formatDeploySecretRef,
  manentConfigSchema,
  parseYaml,
  type DeploySecretRef,
  type SecretStoresConfig,
} from "../../src/core/config/index.js";
import { ManentError } from "../../src/core/errors.js";
import { refusedStoreRef } from "../../src/core/secret-stores/tenant-secret-paths.js";

const envconfigWith = (ref: string) => `plugin: noop\nsecrets:\n  - name: db\n    ref: ${JSON.stringify(ref)}\n`;

function refOf(ref: string): DeploySecretRef {
  return parseYaml(envconfigWith(ref), "prod.yml", envconfigSchema).secrets[0]!.ref;
}

function refusal(ref: string): ManentError {
  try {
    refOf(ref);
  } catch (err) {
    assert.ok(err instanceof ManentError);
    return err;
  }
  assert.fail(`${ref} was accepted`);
}

describe("secret store references", () => {
  it("parse vault: and k8s: references and print them back unchanged", () => {
    assert.deepEqual(refOf("vault:secret/team-a/db#password"), { kind: "vault", mount: "secret", path: "team-a/db", key: "password" });
    assert.deepEqual(refOf("k8s:team-a/db-creds#pass.word"), { kind: "k8s", namespace: "team-a", name: "db-creds", key: "pass.word" });
    for (const ref of ["vault:kv/a/b/c#k_1", "k8s:ns/name.with.dots#KEY-1", "env:X", "file:/etc/x"])
      assert.equal(formatDeploySecretRef(refOf(ref)), ref);
  });

  it("refuse malformed references naming the file, the field and the reason", () => {
    const cases: [string, RegExp][] = [
      ["vault:secret/db", /the #key is missing/],
      ["vault:secret#key", /a mount and a path are needed/],
      ["vault:secret/../team-b/db#password", /path segment "\.\." is not allowed/],
      ["vault:secret//db#password", /path segment "" is not allowed/],
      ["vault:/secret/db#password", /a mount and a path are needed/],
      ["vault:secret/db?x=1#password", /path segment "db\?x=1" is not allowed/],
      ["vault:secret/db#", /the key after "#" is empty/],
      ["vault:secret/db#a b", /the key after "#" is empty or has other characters/],
      ["k8s:Team-A/db#password", /namespace is not a DNS-1123 label/],
      ["k8s:team-a/db#", /must be "k8s:namespace\/name#key"/],
      ["k8s:team-a/db/x#k", /must be "k8s:namespace\/name#key"/],
      ["k8s:team-a/DB#k", /Secret's name is not a DNS-1123 subdomain/],
      ["k8s:team-a/db#a/b", /the key after "#"/],
      ["aws:secret/db#k", /must be "file:\/absolute\/path", "env:NAME", "vault:mount\/path#key" or "k8s:namespace\/name#key"/],
    ];
    for (const [ref, reason] of cases) {
      const err = refusal(ref);
      assert.equal(err.details?.file, "prod.yml", ref);
      assert.equal(err.details?.field, "secrets.0.ref", ref);
      assert.match(err.message, /^prod\.yml: secrets\.0\.ref: /, ref);
      assert.match(err.message, reason, ref);
    }
  });

  it("are allowed to a tenant only within its paths and namespaces, by whole segments", () => {
    const stores: SecretStoresConfig = parseYaml(
      `dbos:\nsecret_stores:
  vault:
    address: http://127.0.0.1:8200
    auth: {method: token, token: "env:VAULT_TOKEN"}
    tenants: {team-a: ["secret/team-a/"], team-b: ["secret/team-b"]}
  kubernetes:
    server: https://127.0.0.1:6443
    token: "file:/etc/token"
    tenants: {team-a: [team-a-secrets]}
`,
      "manent.yml",
      manentConfigSchema,
    ).secret_stores;
    const vault = (path: string) => ({ kind: "vault" as const, mount: "secret", path, key: "k" });
    assert.equal(refusedStoreRef(stores, "team-a", vault("team-a/db")), undefined);
    assert.equal(refusedStoreRef(stores, "team-b", vault("team-b/x/y")), undefined);
    assert.match(
      refusedStoreRef(stores, "team-a", vault("team-b/db"))!,
      /tenant team-a may reference only Vault paths under secret\/team-a\//,
    );
    assert.match(refusedStoreRef(stores, "team-b", vault("team-bb/db"))!, /only Vault paths under secret\/team-b\//);
    assert.match(refusedStoreRef(stores, "team-c", vault("team-a/db"))!, /tenant team-c may reference no Vault path/);
    // Names of Object.prototype are no tenants.
    assert.match(refusedStoreRef(stores, "constructor", vault("team-a/db"))!, /may reference no Vault path/);
    const kube = (namespace: string) => ({ kind: "k8s" as const, namespace, name: "db", key: "k" });
    assert.equal(refusedStoreRef(stores, "team-a", kube("team-a-secrets")), undefined);
    assert.match(refusedStoreRef(stores, "team-b", kube("team-a-secrets"))!, /tenant team-b may reference no Kubernetes namespace/);
    assert.match(
      refusedStoreRef({}, "team-a", kube("x"))!,
      /no Kubernetes store is configured \(secret_stores\.kubernetes in manent\.yml\)/,
    );
  });

  it("refuse a store address that would send a token in clear, or hold credentials", () => {
    const config = (address: string) => `secret_stores:\n  vault:\n    address: ${address}\n    auth: {method: token, token: "env:T"}\n`;
    for (const [address, reason] of [
      ["http://vault.example.com:8200", /http:\/\/ is allowed on loopback only/],
      ["https://user:pw@vault.example.com", /must not hold credentials/],
      ["https://vault.example.com/v1/secret", /no path, query or fragment/],
      ["ftp://vault.example.com", /must be http\(s\)/],
    ] as const) {
      assert.throws(
        () => parseYaml(config(address), "manent.yml", manentConfigSchema),
        (err: ManentError) => err.details?.field === "secret_stores.vault.address" && reason.test(err.message),
        address,
      );
    }
    assert.throws(
      () =>
        parseYaml(
          `secret_stores:\n  vault:\n    address: https://v:8200\n    auth: {method: token, token: "s.abcdef"}\n`,
          "manent.yml",
          manentConfigSchema,
        ),
      (err: ManentError) => err.details?.field === "secret_stores.vault.auth.token" && !err.message.includes("s.abcdef"),
      "a token given as a value rather than a reference is refused without echoing it",
    );
  });
});
