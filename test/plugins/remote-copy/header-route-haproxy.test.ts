import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { Code, ManentError } from "../../../src/plugin.js";
import { HaproxyRuntime } from "../../../src/plugins/remote-copy/haproxy/runtime-api.js";
import { backgroundTraffic, haproxyBinary, sample, share } from "../../support/haproxy.js";
import { slotSites, type SlotSite } from "./slot-fixture.js";

const plan = { weights: true, testers: false, headerRoutes: true };

/**
 * `set_header_route` on a real HAProxy: the route ACL's pattern (set through the runtime API)
 * sends requests with the header or cookie to the candidate whatever the weight, the others
 * follow the weight, and promote and abort leave the ACL empty. 1,000 requests per measurement,
 * background traffic throughout, not one failed request.
 */
describe(
  "remote-copy header routes behind HAProxy",
  { skip: haproxyBinary ? false : "haproxy not installed (scripts/ci/haproxy.sh)" },
  () => {
    const sites = slotSites();

    const aclPatterns = async (s: SlotSite): Promise<string[]> =>
      (await new HaproxyRuntime({ path: s.haproxy.socket }).command(`show acl ${s.haproxy.routeAcl}`))
        .split("\n")
        .filter((l) => l.trim() !== "");

    /** 1,000 requests with `headers`, the background load held: all fine, and the candidate's share. */
    async function measure(t: TestContext, s: SlotSite, load: ReturnType<typeof backgroundTraffic>, what: string, headers = {}) {
      const tally = await load.paused(() => sample(s.haproxy.port, 1000, headers));
      assert.equal(tally.failed, 0, `${what}: failed requests: ${tally.errors.join("; ")}`);
      const candidate = share(tally, "1.1.0");
      t.diagnostic(`${what}: 1.1.0 answered ${candidate.toFixed(1)}% of ${tally.total}`);
      return candidate;
    }

    it("a header then a cookie reach the candidate whatever the weight, others follow it; promote empties the ACL", async (t) => {
      const s = await sites.start({ routeAcl: true }, plan);
      const load = backgroundTraffic(s.haproxy.port);
      try {
        const r = s.req("1.1.0", await s.deployer.prepareSlots(s.req("1.1.0")));
        await s.deployer.deployCandidate(r);
        await s.deployer.setCandidateWeight(r, 10);
        await s.deployer.setHeaderRoute(r, { type: "header", name: "X-Beta", value: "on" });
        assert.equal(await measure(t, s, load, "X-Beta: on at weight 10", { "X-Beta": "on" }), 100);
        assert.equal(await measure(t, s, load, "x-beta: on (name in lower case)", { "x-beta": "on" }), 100);
        assert.ok(Math.abs((await measure(t, s, load, "no header at weight 10")) - 10) <= 3);
        assert.ok(Math.abs((await measure(t, s, load, "X-Beta: off at weight 10", { "X-Beta": "off" })) - 10) <= 3);
        assert.ok(Math.abs((await measure(t, s, load, "X-Beta: onion", { "X-Beta": "onion" })) - 10) <= 3);

        // Changed per step: a cookie now, at weight 50; the header no longer matters.
        await s.deployer.setCandidateWeight(r, 50);
        await s.deployer.setHeaderRoute(r, { type: "cookie", name: "beta", value: "yes" });
        assert.equal((await aclPatterns(s)).length, 1, "the old pattern is gone");
        assert.equal(await measure(t, s, load, "cookie beta=yes among others", { cookie: "a=1; beta=yes; z=2" }), 100);
        assert.equal(await measure(t, s, load, "cookie beta=yes alone", { cookie: "beta=yes" }), 100);
        assert.equal(await measure(t, s, load, "cookie beta=yes, no space", { cookie: "a=1;beta=yes" }), 100);
        assert.ok(Math.abs((await measure(t, s, load, "cookie xbeta=yes", { cookie: "xbeta=yes; a=beta=yes" })) - 50) <= 3);
        assert.ok(Math.abs((await measure(t, s, load, "cookie beta=yesno", { cookie: "beta=yesno" })) - 50) <= 3);
        assert.ok(Math.abs((await measure(t, s, load, "X-Beta: on at weight 50", { "X-Beta": "on" })) - 50) <= 3);

        // Removed: everyone follows the weight.
        await s.deployer.setHeaderRoute(r, null);
        assert.deepEqual(await aclPatterns(s), []);
        assert.ok(Math.abs((await measure(t, s, load, "cookie beta=yes, route removed", { cookie: "beta=yes" })) - 50) <= 3);

        await s.deployer.setHeaderRoute(r, { type: "header", name: "X-Beta", value: "on" });
        await s.deployer.promoteCandidate(r);
        assert.deepEqual(await aclPatterns(s), [], "promote removes the route");
        await s.deployer.retirePrevious(r);
        assert.equal(await measure(t, s, load, "after promote, no header"), 100);
      } finally {
        const tally = await load.stop();
        t.diagnostic(`background requests: ${tally.total}, failed: ${tally.failed}`);
        assert.equal(tally.failed, 0, `failed requests: ${tally.errors.join("; ")}`);
      }
    });

    it("an abort (weight 0, RevertCandidate) empties the ACL and sends the header's requests back to 1.0.0", async (t) => {
      const s = await sites.start({ routeAcl: true }, plan);
      const load = backgroundTraffic(s.haproxy.port);
      try {
        const r = s.req("1.1.0", await s.deployer.prepareSlots(s.req("1.1.0")));
        await s.deployer.deployCandidate(r);
        await s.deployer.setHeaderRoute(r, { type: "header", name: "X-Beta", value: "on" });
        assert.equal(await measure(t, s, load, "X-Beta: on at weight 0", { "X-Beta": "on" }), 100);
        assert.equal(await measure(t, s, load, "no header at weight 0"), 0);
        await s.deployer.setCandidateWeight(r, 0);
        await s.deployer.revertCandidate(r);
        assert.deepEqual(await aclPatterns(s), []);
        assert.equal(await measure(t, s, load, "X-Beta: on after the abort", { "X-Beta": "on" }), 0);
        for (const host of ["web-1", "web-2"]) assert.deepEqual(await s.running(host), ["blue.pid"]);
      } finally {
        const tally = await load.stop();
        assert.equal(tally.failed, 0, `failed requests: ${tally.errors.join("; ")}`);
      }
    });

    it("validate and dry-run refuse a header route HAProxy cannot apply, naming the param", async () => {
      const s = await sites.start({}, plan);
      const { haproxy_route_acl: _, ...withoutAcl } = s.params;
      await assert.rejects(
        s.deployer.validate({ ...s.req("1.1.0"), params: withoutAcl }),
        (e: ManentError) => e.code === Code.InvalidArgument && /param haproxy_route_acl: .*set_header_route/.test(e.message),
      );
      // An ACL file haproxy.cfg does not load: the dry-run names it.
      await assert.rejects(
        s.deployer.dryRun({ ...s.req("1.1.0"), params: { ...s.params, haproxy_route_acl: "/etc/haproxy/nothing.acl" } }),
        /web-1: haproxy: haproxy_route_acl \/etc\/haproxy\/nothing\.acl is not an ACL file haproxy\.cfg loads/,
      );
    });
  },
);
