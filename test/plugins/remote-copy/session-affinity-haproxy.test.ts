import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { backgroundTraffic, get, haproxyBinary, sample, share } from "../../support/haproxy.js";
import { slotSites, type SlotSite } from "./slot-fixture.js";

const plan = { weights: true, testers: false, sessionAffinity: true };

/** A browser-like client: it keeps the cookie HAProxy sets and sends it back. */
interface Client {
  cookie?: string;
  /** The version it reached first. */
  first?: string;
}

/**
 * `session_affinity: true` on a real HAProxy with cookie persistence (`cookie SRV insert`): clients
 * that keep their cookie stay on the version they first reached through the weight changes, new
 * clients follow the weights, and after the promote (or the abort) everyone moves to the version
 * that stays, with not one failed request (the retiring slot goes to maintenance, so its sticky
 * clients are redispatched, rather than draining forever).
 */
describe(
  "remote-copy session affinity behind HAProxy",
  { skip: haproxyBinary ? false : "haproxy not installed (scripts/ci/haproxy.sh)" },
  () => {
    const sites = slotSites();

    /** One request of a client, its cookie kept; a failure is returned, not thrown, to be counted. */
    async function visit(s: SlotSite, c: Client): Promise<{ ok: boolean; version?: string; error?: string }> {
      const a = await get(s.haproxy.port, c.cookie ? { cookie: c.cookie } : {});
      const srv = a.cookies?.find((x) => x.startsWith("SRV="));
      if (srv) c.cookie = srv;
      return a;
    }

    /** Every client `n` times (1,000+ requests): each answer comes from the version it first reached. */
    async function stay(t: TestContext, s: SlotSite, clients: Client[], n: number, what: string): Promise<void> {
      let moved = 0;
      for (let i = 0; i < n; i++)
        for (const c of clients) {
          const a = await visit(s, c);
          assert.ok(a.ok, `${what}: ${a.error}`);
          c.first ??= a.version;
          if (a.version !== c.first) moved++;
        }
      const onCandidate = clients.filter((c) => c.first === "1.1.0").length;
      t.diagnostic(`${what}: ${clients.length * n} requests, ${onCandidate} of ${clients.length} clients on 1.1.0, ${moved} moved`);
      assert.equal(moved, 0, `${what}: ${moved} answers from another version than the client's first`);
    }

    /** Sticky clients in a loop until stopped, counting failures: the proof nothing fails while slots change. */
    function stickyLoad(s: SlotSite, clients: Client[]): { stop(): Promise<{ total: number; failed: string[] }> } {
      let stopped = false;
      const failed: string[] = [];
      let total = 0;
      const loop = (async () => {
        for (let i = 0; !stopped && total < 200_000; i++) {
          const a = await visit(s, clients[i % clients.length]!);
          total++;
          if (!a.ok) failed.push(a.error ?? "?");
        }
      })();
      return {
        async stop() {
          stopped = true;
          await loop;
          return { total, failed };
        },
      };
    }

    /**
     * The clients' visits and the new clients' samples run with the background traffic paused (as
     * the other HAProxy tests measure): it runs on between them, through every weight change, and
     * had used half the CPU the measurements needed (1,000 requests took 2 s instead of 1).
     */
    async function rollOut(t: TestContext, s: SlotSite, load: ReturnType<typeof backgroundTraffic>) {
      const r = s.req("1.1.0", await s.deployer.prepareSlots(s.req("1.1.0")));
      await s.deployer.deployCandidate(r);
      await s.deployer.setCandidateWeight(r, 30);
      const clients: Client[] = Array.from({ length: 200 }, () => ({}));
      await load.paused(() => stay(t, s, clients, 5, "weight 30"));
      const onCandidate = clients.filter((c) => c.first === "1.1.0").length;
      assert.ok(onCandidate > 0 && onCandidate < 200, `some clients on each version (${onCandidate} on 1.1.0)`);
      for (const weight of [70, 10]) {
        await s.deployer.setCandidateWeight(r, weight);
        await load.paused(() => stay(t, s, clients, 5, `weight ${weight}, same clients`));
        const fresh = await load.paused(() => sample(s.haproxy.port, 1000));
        assert.equal(fresh.failed, 0, fresh.errors.join("; "));
        t.diagnostic(`weight ${weight}, new clients: 1.1.0 answered ${share(fresh, "1.1.0").toFixed(1)}%`);
        assert.ok(Math.abs(share(fresh, "1.1.0") - weight) <= 5, `new clients follow weight ${weight}`);
      }
      return { r, clients };
    }

    /**
     * Rolls out to 1.1.0 with sticky clients, then `end`s the rollout (promote or abort) under their
     * load: not one request fails, and afterwards every client reaches `stays` and only `slot` runs.
     * The two endings share all of this; only the calls and the version that stays differ.
     */
    async function rollOutAndEnd(
      t: TestContext,
      end: { during: string; after: string; stays: string; slot: string; message: string },
      calls: (s: SlotSite, r: Awaited<ReturnType<typeof rollOut>>["r"]) => Promise<void>,
    ): Promise<void> {
      const s = await sites.start({ sticky: true }, plan);
      const load = backgroundTraffic(s.haproxy.port);
      try {
        const { r, clients } = await rollOut(t, s, load);
        const sticky = stickyLoad(s, clients);
        let during: { total: number; failed: string[] };
        try {
          await calls(s, r);
        } finally {
          during = await sticky.stop();
        }
        t.diagnostic(`sticky requests during ${end.during}: ${during.total}, failed: ${during.failed.length}`);
        assert.deepEqual(during.failed, []);
        for (const c of clients) c.first = undefined;
        await load.paused(() => stay(t, s, clients, 5, end.after));
        assert.ok(
          clients.every((c) => c.first === end.stays),
          end.message,
        );
        for (const host of ["web-1", "web-2"]) assert.deepEqual(await s.running(host), [`${end.slot}.pid`]);
      } finally {
        const tally = await load.stop();
        assert.equal(tally.failed, 0, `failed requests: ${tally.errors.join("; ")}`);
      }
    }

    it("clients stay on their version through weight changes; after the promote all reach 1.1.0, none failed", (t) =>
      rollOutAndEnd(
        t,
        {
          during: "promote and retire",
          after: "after the promote",
          stays: "1.1.0",
          slot: "green",
          message: "every client, its old cookie included, is on 1.1.0",
        },
        async (s, r) => {
          await s.deployer.promoteCandidate(r);
          await s.deployer.retirePrevious(r);
        },
      ));

    it("after an abort (weight 0, RevertCandidate) the candidate's clients are back on 1.0.0, none failed", (t) =>
      rollOutAndEnd(
        t,
        { during: "the abort", after: "after the abort", stays: "1.0.0", slot: "blue", message: "every client is on 1.0.0" },
        async (s, r) => {
          await s.deployer.setCandidateWeight(r, 0);
          await s.deployer.revertCandidate(r);
        },
      ));
  },
);
