import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import { descriptor } from "../support/workspace.js";
import { ServerFixture, type StartedServer } from "../support/server-fixture.js";
import { gitEnvconfig, upstream } from "../support/git-upstream.js";
import { runCli } from "../support/server-process.js";

/** A real server whose envconfig comes from a real git repository (file://): deploys read it, admins refresh it. */
describe("git envconfig provider through the server", () => {
  const fixture = new ServerFixture();
  let s: StartedServer;
  let up: Awaited<ReturnType<typeof upstream>>;
  const adminToken = "admin-token-0123456789abcdef";
  const viewerToken = "viewer-token-0123456789abcdef";
  const file = "untenanted/shop/shop/test.yml";

  before(async () => {
    up = await upstream();
    await up.commit({ [file]: "plugin: noop\ntargets: [{host: shop-1}]\n" }, "one");
    process.env.MANENT_TEST_GIT_ADMIN = adminToken;
    process.env.MANENT_TEST_GIT_VIEWER = viewerToken;
    s = await fixture.start("hello\n", {
      envconfig: gitEnvconfig(`file://${up.bare}`),
      auth: {
        tokens: [
          { name: "admin", tenant: "*", token: "env:MANENT_TEST_GIT_ADMIN" },
          { name: "viewer", tenant: "*", role: "viewer", token: "env:MANENT_TEST_GIT_VIEWER" },
        ],
      },
    });
  });
  after(() => fixture.stop());

  it("deploys with the envconfig at the fetched commit; refresh is admin only and moves to the new commit", async () => {
    const admin = new ApiClient(s.server.url, adminToken);
    const submitted = await admin.submit({ descriptor: descriptor("shop", "test", s.artifact), descriptor_file: "shop.yml" });
    assert.equal((await admin.deploy(submitted.id, 60)).status, "succeeded");

    const viewer = await fetch(`${s.server.url}/api/v1/envconfig/refresh`, {
      method: "POST",
      headers: { authorization: `Bearer ${viewerToken}` },
    });
    assert.equal(viewer.status, 403);

    const before = (await admin.refreshEnvconfig()).providers[0]!;
    assert.equal(before.error, null);
    const next = await up.commit({ [file]: "plugin: noop\ntargets: [{host: shop-2}]\n" }, "two");
    const cli = await runCli(["envconfig", "refresh", "-o", "text"], { cwd: s.ws.dir, server: s.server.url, token: adminToken });
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, new RegExp(`gitops\\t${before.after} -> ${next}`));
  });
});
