import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { authorizeDelegation, type Grant, type Principal } from "../../src/core/identity/index.js";

const principal = (...grants: Grant[]): Principal => ({ kind: "token", id: "token:t", name: "t", groups: [], grants });
const grant = (role: Grant["role"], tenant: string, application = "*", environment = "*"): Grant => ({
  role,
  scope: { tenant, application, environment },
});
const allowed = (p: Principal, g: Grant): boolean => {
  try {
    authorizeDelegation(p, g);
    return true;
  } catch {
    return false;
  }
};

describe("creating a token never hands out more than the creator has", () => {
  it("a tenant's admin: its tenant only, any role there, narrower scopes too", () => {
    const teamAdmin = principal(grant("admin", "team-a"));
    assert.equal(allowed(teamAdmin, grant("deployer", "team-a")), true);
    assert.equal(allowed(teamAdmin, grant("admin", "team-a", "shop", "prod*")), true);
    for (const tenant of ["team-b", "*", "team-*", "team-a*"]) assert.equal(allowed(teamAdmin, grant("viewer", tenant)), false, tenant);
  });

  it("patterns: team-* covers team-a and team-a*; prod does not cover prod*", () => {
    const admins = principal(grant("admin", "team-*", "*", "prod"));
    assert.equal(allowed(admins, grant("viewer", "team-a", "*", "prod")), true);
    assert.equal(allowed(admins, grant("viewer", "team-a*", "*", "prod")), true);
    assert.equal(allowed(admins, grant("viewer", "team-a", "*", "prod*")), false);
    assert.equal(allowed(admins, grant("viewer", "team-a", "*", "*")), false);
  });

  it("needs token_admin over the whole scope of the new token, from one grant; the refusal names the permission", () => {
    assert.throws(
      () => authorizeDelegation(principal(grant("deployer", "*")), grant("viewer", "team-a")),
      /needs the token_admin permission/,
    );
    // Admin in dev and deployer everywhere: a token for every environment is more than the admin grant covers.
    const p = principal(grant("admin", "team-a", "*", "dev"), grant("deployer", "team-a"));
    assert.equal(allowed(p, grant("deployer", "team-a", "*", "dev")), true);
    assert.throws(
      () => authorizeDelegation(p, grant("viewer", "team-a")),
      /t may not token_admin in tenant team-a.*needs the token_admin permission \(role admin\)/,
    );
  });
});
