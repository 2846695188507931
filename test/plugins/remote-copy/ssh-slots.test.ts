import assert from "node:assert/strict";
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Target } from "../../../src/plugin.js";
import { RemoteCopyDeployer } from "../../../src/plugins/remote-copy/index.js";
import { startSshHosts, type SshHosts } from "../../support/sshd/index.js";
import {
  backgroundTraffic,
  haproxyBinary,
  killSlotProcesses,
  sample,
  share,
  startHaproxy,
  twoSlotHosts,
  type Haproxy,
} from "../../support/haproxy.js";
import { buildArtifacts } from "./slot-fixture.js";
import { currentOf, request, type TestArtifact } from "./helpers.js";
import { sshAccess } from "./ssh-fixture.js";

/** The same slots and HAProxy calls as slots-haproxy.test.ts, with the hosts reached over a real sshd. */
describe(
  "remote-copy slots over SSH behind HAProxy",
  { skip: haproxyBinary ? false : "haproxy not installed (scripts/ci/haproxy.sh)" },
  () => {
    let hosts: SshHosts;
    let haproxy: Haproxy;
    let dist: string;
    let base: string;
    let art: Record<string, TestArtifact>;
    const targets: Target[] = [];

    before(async () => {
      hosts = await startSshHosts(2);
      ({ dist, art } = await buildArtifacts());
      const laid = await twoSlotHosts(hosts.servers.map((s) => s.host));
      targets.push(...laid.targets.map((t, i) => ({ ...t, port: hosts.servers[i]!.port })));
      haproxy = await startHaproxy(dist, laid.servers);
      base = join(await hosts.ownedDir("slots"), "{host}");
    });
    after(async () => {
      await haproxy?.stop();
      if (base) await killSlotProcesses(targets.map((t) => base.replace("{host}", t.host)));
      await hosts?.close();
      await rm(dist, { recursive: true, force: true });
    });

    it("runs the candidate beside the live slot, moves the weights, promotes and retires with no failed request", async (t) => {
      const { params: access, secrets } = sshAccess(hosts, base);
      const params = {
        ...access,
        activate: "./activate.sh",
        deactivate: "./deactivate.sh",
        activate_timeout: "30s",
        haproxy_socket: haproxy.socket,
        haproxy_backend: haproxy.backend,
        haproxy_tester_backend: haproxy.testerBackend,
        drain_timeout: "20s",
      };
      const req = (v: string, traffic?: Record<string, string>) => ({
        ...request({ artifact: art[v]!, targets, params, secrets, parallelism: 2 }),
        ...(traffic ? { traffic } : {}),
      });
      const d = new RemoteCopyDeployer({});
      await d.deploy(req("1.0.0"));
      assert.deepEqual((await sample(haproxy.port, 50)).byVersion, { "1.0.0": 50 });

      const load = backgroundTraffic(haproxy.port, 1);
      try {
        const traffic = await d.prepareSlots(req("1.1.0"));
        const r = req("1.1.0", traffic);
        await d.deployCandidate(r);
        await d.routeTesters(r);
        assert.deepEqual((await sample(haproxy.port, 20, { "X-Canary": "always" })).byVersion, { "1.1.0": 20 });
        for (const weight of [10, 50, 100]) {
          await d.setCandidateWeight(r, weight);
          const s = await load.paused(() => sample(haproxy.port, 200));
          t.diagnostic(`weight ${weight}: 1.1.0 answered ${share(s, "1.1.0").toFixed(1)}% of ${s.total}`);
          assert.equal(s.failed, 0);
          assert.ok(Math.abs(share(s, "1.1.0") - weight) <= 3);
        }
        await d.promoteCandidate(r);
        await d.retirePrevious(r);
      } finally {
        const tally = await load.stop();
        t.diagnostic(`background requests: ${tally.total}, failed: ${tally.failed}`);
        assert.equal(tally.failed, 0, tally.errors.join("; "));
      }
      for (const target of targets) {
        const hostBase = base.replace("{host}", target.host);
        assert.equal(await currentOf(hostBase), "1.1.0");
        assert.equal((await readFile(join(hostBase, ".live-slot"), "utf8")).trim(), "green");
        assert.deepEqual(
          (await readdir(join(hostBase, "run"))).filter((f) => f.endsWith(".pid")),
          ["green.pid"],
        );
      }
      assert.deepEqual((await sample(haproxy.port, 100)).byVersion, { "1.1.0": 100 });
    });
  },
);
