import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it, type TestContext } from "node:test";
import { Code, ManentError, type Request, type Target } from "../../../src/plugin.js";
import { RemoteCopyDeployer } from "../../../src/plugins/remote-copy/index.js";
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
import { currentOf, request, rollbackRequest, type TestArtifact } from "./helpers.js";

const tester = { "X-Canary": "always" };

/**
 * The example app (examples/canary-quickstart) on two local targets with two slots each, behind a
 * real HAProxy driven through its runtime API, rolled out the way the engine calls the plugin:
 * PrepareSlots, DeployCandidate, RouteTesters, SetCandidateWeight per step, Promote, Retire (or
 * weight 0 and Revert), with `traffic` from PrepareSlots passed along.
 */
describe("remote-copy slots behind HAProxy", { skip: haproxyBinary ? false : "haproxy not installed (scripts/ci/haproxy.sh)" }, () => {
  let dist: string;
  let art: Record<string, TestArtifact>;
  let dir: string;
  let haproxy: Haproxy;
  let targets: Target[];
  let params: Record<string, string>;
  let deployer: RemoteCopyDeployer;

  before(async () => ({ dist, art } = await buildArtifacts()));
  after(() => rm(dist, { recursive: true, force: true }));

  /** A fresh pair of hosts and HAProxy for each test, 1.0.0 deployed in slot blue. */
  async function setUp(initial = true): Promise<void> {
    dir = await mkdtemp(join(tmpdir(), "manent-slots-"));
    const laid = await twoSlotHosts(["web-1", "web-2"]);
    targets = laid.targets;
    haproxy = await startHaproxy(dir, laid.servers);
    params = {
      transport: "local",
      base: join(dir, "hosts", "{host}"),
      keep_releases: "3",
      activate: "./activate.sh",
      deactivate: "./deactivate.sh",
      activate_timeout: "30s",
      haproxy_socket: haproxy.socket,
      haproxy_backend: haproxy.backend,
      haproxy_tester_backend: haproxy.testerBackend,
      tester_header: haproxy.testerHeader,
      drain_timeout: "20s",
    };
    deployer = new RemoteCopyDeployer({});
    if (initial) await deployer.deploy(req("1.0.0"));
  }

  afterEach(async () => {
    await haproxy?.stop();
    // Stop whatever app process a test left running, by the pid files its slots wrote.
    await killSlotProcesses((targets ?? []).map((t) => join(dir, "hosts", t.host)));
    await rm(dir, { recursive: true, force: true });
  });

  function req(version: string, traffic?: Record<string, string>): Request {
    const r = request({ artifact: art[version]!, targets, params });
    return traffic ? { ...r, traffic } : r;
  }

  const baseOf = (host: string): string => join(dir, "hosts", host);
  const running = async (host: string): Promise<string[]> =>
    (await readdir(join(baseOf(host), "run")).catch(() => [] as string[])).filter((f) => f.endsWith(".pid")).sort();
  const liveSlot = async (host: string): Promise<string> => (await readFile(join(baseOf(host), ".live-slot"), "utf8")).trim();

  /** 1,000 requests at the current weight: the candidate's share is within ±3 points of it. */
  async function checkShare(t: TestContext, load: ReturnType<typeof backgroundTraffic>, weight: number): Promise<number> {
    const s = await load.paused(() => sample(haproxy.port, 1000));
    assert.equal(s.failed, 0, `failed requests at weight ${weight}: ${s.errors.join("; ")}`);
    const measured = share(s, "1.1.0");
    t.diagnostic(
      `weight ${weight}: 1.1.0 answered ${measured.toFixed(1)}% of ${s.total} requests (1.0.0: ${share(s, "1.0.0").toFixed(1)}%)`,
    );
    assert.ok(Math.abs(measured - weight) <= 3, `share ${measured}% at weight ${weight}`);
    return measured;
  }

  async function testersReachCandidate(): Promise<void> {
    const s = await sample(haproxy.port, 50, tester);
    assert.equal(s.failed, 0, s.errors.join("; "));
    assert.deepEqual(s.byVersion, { "1.1.0": 50 }, "testers reach the candidate");
  }

  it("rolls 1.0.0 → 1.1.0 at 10, 50, 100 with the weights measured and not one failed request; rollback after promote", async (t) => {
    await setUp();
    assert.deepEqual((await sample(haproxy.port, 100)).byVersion, { "1.0.0": 100 });
    const load = backgroundTraffic(haproxy.port);
    try {
      const traffic = await deployer.prepareSlots(req("1.1.0"));
      assert.deepEqual(traffic, {
        "live/web-1": "blue",
        "candidate/web-1": "green",
        "live_version/web-1": "1.0.0",
        "live/web-2": "blue",
        "candidate/web-2": "green",
        "live_version/web-2": "1.0.0",
      });
      const r = req("1.1.0", traffic);
      const deployed = await deployer.deployCandidate(r);
      assert.deepEqual(
        deployed.targets.map((x) => [x.host, x.status, x.details?.["slot"]]),
        [
          ["web-1", "deployed", "green"],
          ["web-2", "deployed", "green"],
        ],
      );
      assert.equal(await deployer.candidateWeight(r), 0);
      assert.deepEqual((await sample(haproxy.port, 200)).byVersion, { "1.0.0": 200 }, "a candidate at weight 0 gets nothing");
      const routed = await deployer.routeTesters(r);
      assert.equal(routed["header"], "X-Canary: always");
      await testersReachCandidate();

      for (const weight of [10, 50, 100]) {
        await deployer.setCandidateWeight(r, weight);
        assert.equal(await deployer.candidateWeight(r), weight);
        await checkShare(t, load, weight);
        await testersReachCandidate();
      }
      await deployer.promoteCandidate(r);
      assert.equal(await liveSlot("web-1"), "green");
      assert.equal(await currentOf(baseOf("web-2")), "1.1.0");
      await deployer.retirePrevious(r);
      const s = await sample(haproxy.port, 1000);
      assert.deepEqual(s.byVersion, { "1.1.0": 1000 });
      for (const host of ["web-1", "web-2"]) assert.deepEqual(await running(host), ["green.pid"], `${host}: blue stopped`);
    } finally {
      const tally = await load.stop();
      t.diagnostic(`background requests during the rollout and promote: ${tally.total}, failed: ${tally.failed}`);
      assert.equal(tally.failed, 0, `failed requests: ${tally.errors.join("; ")}`);
      assert.ok(tally.total > 1000);
    }
    assert.deepEqual(
      (await deployer.currentRelease(req("1.1.0"))).map((x) => x.version),
      ["1.1.0", "1.1.0"],
    );

    // Rollback after a promoted release works as without slots: the live slot runs 1.0.0 again.
    const releases = targets.map((x) => ({ host: x.host, version: "1.0.0", details: {} }));
    const rolledBack = await deployer.rollback(rollbackRequest({ artifact: art["1.1.0"]!, targets, params }, releases));
    assert.deepEqual(
      rolledBack.targets.map((x) => x.status),
      ["rolled_back", "rolled_back"],
    );
    assert.deepEqual((await sample(haproxy.port, 200)).byVersion, { "1.0.0": 200 });
    assert.equal(await liveSlot("web-1"), "green");
  });

  it("an abort at 50 (weight 0, RevertCandidate) leaves 100% on 1.0.0 and not one failed request", async (t) => {
    await setUp();
    const load = backgroundTraffic(haproxy.port);
    try {
      const traffic = await deployer.prepareSlots(req("1.1.0"));
      const r = req("1.1.0", traffic);
      await deployer.deployCandidate(r);
      await deployer.routeTesters(r);
      await testersReachCandidate();
      for (const weight of [10, 50]) {
        await deployer.setCandidateWeight(r, weight);
        await checkShare(t, load, weight);
        await testersReachCandidate();
      }
      // The engine's abort: weight 0, then RevertCandidate.
      await deployer.setCandidateWeight(r, 0);
      await deployer.revertCandidate(r);
      const s = await sample(haproxy.port, 1000);
      assert.equal(s.failed, 0);
      assert.deepEqual(s.byVersion, { "1.0.0": 1000 });
      t.diagnostic(`after the abort: 1.0.0 answered ${share(s, "1.0.0")}% of ${s.total} requests`);
      const testers = await sample(haproxy.port, 50, tester);
      assert.deepEqual(testers.byVersion, { "1.0.0": 50 }, "testers are back on the live release");
      for (const host of ["web-1", "web-2"]) {
        assert.deepEqual(await running(host), ["blue.pid"], `${host}: candidate stopped`);
        assert.equal(await liveSlot(host), "blue");
        assert.equal(await currentOf(baseOf(host)), "1.0.0");
      }
      assert.equal(await deployer.candidateWeight(r), 0);
    } finally {
      const tally = await load.stop();
      t.diagnostic(`background requests during the aborted rollout: ${tally.total}, failed: ${tally.failed}`);
      assert.equal(tally.failed, 0, `failed requests: ${tally.errors.join("; ")}`);
    }
  });

  it("a first rollout, with nothing live, sends every request to the candidate from the first step", async () => {
    await setUp(false);
    const traffic = await deployer.prepareSlots(req("1.0.0"));
    assert.equal(traffic["live_version/web-1"], "");
    const r = req("1.0.0", traffic);
    await deployer.deployCandidate(r);
    await deployer.setCandidateWeight(r, 10);
    const s = await sample(haproxy.port, 100);
    assert.equal(s.failed, 0, s.errors.join("; "));
    assert.deepEqual(s.byVersion, { "1.0.0": 100 });
    await deployer.promoteCandidate(r);
    await deployer.retirePrevious(r);
    assert.equal(await liveSlot("web-2"), "green");
    assert.deepEqual(
      (await deployer.currentRelease(r)).map((x) => x.version),
      ["1.0.0", "1.0.0"],
    );
  });

  it("refuses what would cut traffic or act blindly, and dry-run checks HAProxy's servers", async () => {
    await setUp();
    const traffic = await deployer.prepareSlots(req("1.1.0"));
    const r = req("1.1.0", traffic);
    const code = (c: Code) => (err: unknown) => err instanceof ManentError && err.code === c;

    // No state from PrepareSlots: the plugin cannot know which slot is which.
    await assert.rejects(deployer.deployCandidate(req("1.1.0")), code(Code.FailedPrecondition));
    await assert.rejects(deployer.setCandidateWeight(req("1.1.0"), 10), code(Code.FailedPrecondition));
    await assert.rejects(deployer.setCandidateWeight(r, 101), code(Code.InvalidArgument));
    // Retiring before a promote would stop the live slot.
    await deployer.deployCandidate(r);
    await assert.rejects(deployer.retirePrevious(r), code(Code.FailedPrecondition));
    assert.deepEqual(await running("web-1"), ["blue.pid", "green.pid"]);
    assert.deepEqual((await sample(haproxy.port, 100)).byVersion, { "1.0.0": 100 });

    const dry = await deployer.dryRun(req("1.1.0"));
    assert.deepEqual(
      dry.targets.map((x) => x.status),
      ["ready", "ready"],
    );
    const wrongServers = { ...params, haproxy_server: "{host}-{slot}" };
    await assert.rejects(
      deployer.dryRun(request({ artifact: art["1.1.0"]!, targets, params: wrongServers })),
      (err: unknown) => err instanceof Error && /server hello\/web-1-blue not found/.test(err.message),
    );
    await assert.rejects(
      deployer.validate(request({ artifact: art["1.1.0"]!, targets, params: { ...params, slot_ports: "blue=1" } })),
      (err: unknown) => err instanceof ManentError && err.code === Code.InvalidArgument && /slot_ports/.test(err.message),
    );
    await assert.rejects(
      deployer.validate(request({ artifact: art["1.1.0"]!, targets: [{ host: "web-1", labels: {} }], params })),
      (err: unknown) => err instanceof ManentError && err.code === Code.InvalidArgument && /no slots/.test(err.message),
    );
    // manent.yml pins the HAProxy runtime API: an envconfig cannot point the server elsewhere.
    const pinned = new RemoteCopyDeployer({ haproxy_socket: haproxy.socket });
    await pinned.validate(req("1.1.0"));
    await assert.rejects(
      pinned.validate(request({ artifact: art["1.1.0"]!, targets, params: { ...params, haproxy_socket: "127.0.0.1:9999" } })),
      (err: unknown) =>
        err instanceof ManentError &&
        err.code === Code.InvalidArgument &&
        /haproxy_socket: fixed by the server's configuration/.test(err.message),
    );
    await deployer.setCandidateWeight(r, 0);
    await deployer.revertCandidate(r);
  });
});
