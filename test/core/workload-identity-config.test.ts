import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pinsOwner } from "../../src/core/config/index.js";
import { matchWorkload } from "../../src/server/workload-identity/index.js";
import { loadManentYml } from "../support/load-manent-yml.js";

const github = "https://token.actions.githubusercontent.com";
const entry = (over: Record<string, unknown> = {}) => ({
  name: "shop",
  issuer: github,
  audience: "https://manent.example.com",
  claims: { repository: "acme/shop" },
  role: "deployer",
  tenant: "team-a",
  ...over,
});

/** manent.yml's auth.workload_identities: unsafe, ambiguous and malformed entries refused naming the field; how claims match. */
describe("workload identity configuration", () => {
  const load = (auth: unknown) => loadManentYml({ auth });

  it("takes an entry with defaults: any application and environment of its tenant", async () => {
    const config = await load({ workload_identities: [entry()] });
    assert.deepEqual(config.auth.workload_identities[0], { ...entry(), application: "*", environment: "*" });
  });

  it("refuses entries that would trust anyone's job, admin, verified claims, duplicates and people's audiences, naming file, field and reason", async () => {
    for (const [auth, field, reason] of [
      // sub "*" alone on GitHub's public issuer: every repository on GitHub could deploy.
      [
        { workload_identities: [entry({ claims: { sub: "*" } })] },
        "auth.workload_identities.0.claims",
        /unsafe: no claim pins whose job it is/,
      ],
      [{ workload_identities: [entry({ claims: { sub: "repo:*" } })] }, "auth.workload_identities.0.claims", /unsafe/],
      [{ workload_identities: [entry({ claims: { repository_owner: "acme*" } })] }, "auth.workload_identities.0.claims", /unsafe/],
      // Constraining only what every repository has (a branch, an environment) pins nobody.
      [
        { workload_identities: [entry({ claims: { ref: "refs/heads/main", environment: "prod" } })] },
        "auth.workload_identities.0.claims",
        /unsafe: .*any repository or project on https:\/\/token\.actions\.githubusercontent\.com could match/,
      ],
      // One pattern of a list that does not pin the owner unpins the claim.
      [{ workload_identities: [entry({ claims: { repository: ["acme/shop", "*"] } })] }, "auth.workload_identities.0.claims", /unsafe/],
      [{ workload_identities: [entry({ claims: {} })] }, "auth.workload_identities.0.claims", /unsafe/],
      [{ workload_identities: [entry({ role: "admin" })] }, "auth.workload_identities.0.role", /viewer|deployer|approver/],
      [
        { workload_identities: [entry({ claims: { repository: "acme/shop", aud: "x" } })] },
        "auth.workload_identities.0.claims.aud",
        /checked by the token's verification/,
      ],
      [{ workload_identities: [entry({ issuer: "http://ci.example.com" })] }, "auth.workload_identities.0.issuer", /https/],
      [{ workload_identities: [entry({ audience: "" })] }, "auth.workload_identities.0.audience", /1/],
      [{ workload_identities: [entry(), entry({ tenant: "team-b" })] }, "auth.workload_identities.1.name", /already the name of entry 0/],
      [
        { workload_identities: [entry(), entry({ name: "shop-b", tenant: "team-b" })] },
        "auth.workload_identities.1.claims",
        /entry 0 \(shop\) matches exactly the same tokens/,
      ],
      [
        { workload_identities: [entry(), entry({ name: "other", claims: { repository: "acme/other" }, ca_file: "ca.pem" })] },
        "auth.workload_identities.1.ca_file",
        /same issuer with no ca_file/,
      ],
      [
        {
          oidc: { issuer: "https://login.example.com", client_id: "manent", client_secret: "env:S", cli_client_id: "manent-cli" },
          workload_identities: [entry({ issuer: "https://login.example.com", audience: "manent-cli" })],
        },
        "auth.workload_identities.0.audience",
        /client id of auth\.oidc at the same issuer/,
      ],
    ] as const) {
      await assert.rejects(load(auth), (err: Error) => {
        assert.ok(err.message.includes(`manent.yml: ${field}`), `${err.message} names ${field}`);
        assert.match(err.message, reason);
        return true;
      });
    }
  });

  it("tells a pattern that fixes the owner from one that does not", () => {
    for (const p of ["acme/shop", "repo:acme/*", "project_path:group/app:*", "acme/shop-*", "123456"]) assert.ok(pinsOwner(p), p);
    for (const p of ["*", "repo:*", "acme*", "repo:/*", "/*", "*/shop"]) assert.ok(!pinsOwner(p), p);
  });

  it("gives a token matching several entries all their grants, and says why each entry did not match", async () => {
    const config = await load({
      workload_identities: [
        entry({ name: "deploy", claims: { repository: "acme/shop", ref: "refs/heads/*" }, environment: "dev" }),
        entry({ name: "approve", claims: { repository: "acme/shop", workflow: "approve" }, role: "approver" }),
        entry({ name: "other", audience: "https://other.example.com", claims: { repository: "acme/shop" } }),
      ],
    });
    const entries = config.auth.workload_identities;
    const aud = "https://manent.example.com";
    const both = matchWorkload(entries, { aud, repository: "acme/shop", ref: "refs/heads/main", workflow: "approve" });
    assert.ok("grants" in both);
    assert.deepEqual(
      both.grants.map((g) => [g.role, g.scope.environment]),
      [
        ["deployer", "dev"],
        ["approver", "*"],
      ],
    );
    const none = matchWorkload(entries, { aud, repository: "acme/shop", ref: 7, workflow: ["approve"] });
    assert.ok("reasons" in none);
    assert.deepEqual(none.reasons, [
      'deploy: claim ref is "7", not refs/heads/*',
      "approve: claim workflow is not a string (wants approve)",
      "other: audience is not https://other.example.com",
    ]);
  });
});
