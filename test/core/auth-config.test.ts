import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { can } from "../../src/core/identity/index.js";
import { grantsForUser } from "../../src/server/identity/index.js";
import { loadManentYml } from "../support/load-manent-yml.js";

/** manent.yml's auth section: roles on tokens and grants, checked with errors naming the field; a person's grants from it. */
describe("auth configuration", () => {
  const load = (auth: unknown) => loadManentYml({ auth });

  it("gives a token without a role the admin role everywhere it names, as before roles existed", async () => {
    const config = await load({ tokens: [{ name: "ci", tenant: "team-a", token: "env:X" }] });
    assert.deepEqual(config.auth.tokens[0], {
      name: "ci",
      tenant: "team-a",
      role: "admin",
      application: "*",
      environment: "*",
      groups: [],
      token: { kind: "env", name: "X" },
    });
    assert.deepEqual(config.auth.grants, []);
  });

  it("refuses bad roles, patterns and grants, naming the field", async () => {
    for (const [auth, field, reason] of [
      [{ tokens: [{ name: "ci", tenant: "*", role: "root", token: "env:X" }] }, "auth.tokens.0.role", /viewer|deployer/],
      [{ tokens: [{ name: "ci", tenant: "*", environment: "Prod 1", token: "env:X" }] }, "auth.tokens.0.environment", /pattern/],
      [{ grants: [{ role: "viewer" }] }, "auth.grants.0", /name the groups or users/],
      [{ grants: [{ role: "viewer", groups: ["g"], tenant: "team?" }] }, "auth.grants.0.tenant", /pattern/],
      [{ grants: [{ role: "viewer", groups: ["g"], everywhere: true }] }, "auth.grants.0", /everywhere/],
    ] as const) {
      await assert.rejects(load(auth), (err: Error) => {
        assert.ok(err.message.includes(`manent.yml: ${field}`), `${err.message} names ${field}`);
        assert.match(err.message, reason);
        return true;
      });
    }
  });

  it("grants a person the roles of their groups, verified e-mail (any case) or subject, and nothing else", async () => {
    const config = await load({
      grants: [
        { role: "viewer", groups: ["engineering"] },
        { role: "approver", groups: ["release-managers"], environment: "prod*" },
        { role: "admin", users: ["Alice@Example.com", "sub-42"] },
      ],
    });
    const roles = (user: Parameters<typeof grantsForUser>[0]) => grantsForUser(user, config.auth).map((g) => g.role);
    assert.deepEqual(roles({ subject: "s1", email: "bob@example.com", emailVerified: true, groups: ["engineering"] }), ["viewer"]);
    assert.deepEqual(
      roles({ subject: "s2", email: "carol@example.com", emailVerified: true, groups: ["engineering", "release-managers"] }),
      ["viewer", "approver"],
    );
    assert.deepEqual(roles({ subject: "s3", email: "alice@example.COM", emailVerified: true, groups: [] }), ["admin"]);
    assert.deepEqual(roles({ subject: "sub-42", emailVerified: false, groups: [] }), ["admin"]);
    assert.deepEqual(
      roles({ subject: "s5", email: "alice@example.com", emailVerified: false, groups: [] }),
      [],
      "an address the provider does not vouch for grants nothing by e-mail",
    );
    assert.deepEqual(
      roles({ subject: "s4", email: "mallory@example.com", emailVerified: true, groups: ["Engineering"] }),
      [],
      "groups compare exactly",
    );
    const carol = {
      kind: "user" as const,
      id: "user:s2",
      name: "carol",
      groups: [],
      grants: grantsForUser({ subject: "s2", emailVerified: false, groups: ["release-managers"] }, config.auth),
    };
    assert.equal(can(carol, "approve", { tenant: "team-a", application: "shop", environment: "prod-eu" }), true);
    assert.equal(can(carol, "approve", { tenant: "team-a", application: "shop", environment: "staging" }), false);
  });
});
