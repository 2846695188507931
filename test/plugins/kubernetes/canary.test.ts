import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { Code, ManentError, capabilitiesOf, type Request } from "../../../src/plugin.js";
import { checkRolloutSettings } from "../../../src/core/rollout/rollout-checks.js";
import { rolloutSchema } from "../../../src/core/rollout/rollout-config.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { KubeControlPlane, tutorialRoleRules, type ClusterAccess } from "../../support/kube/control-plane.js";
import { repoRoot } from "../../support/server-process.js";
import {
  getObj,
  helloManifest,
  specManagers,
  makeRequest,
  memoryLogger,
  pullableImages,
  rollbackRequest,
  scratch,
  stuckManifest,
} from "./helpers.js";

const run = promisify(execFile);

/** The cluster's gateway set-up, as its admin does it: the route to the Service hello. */
const routeManifest = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: hello
  namespace: hello
spec:
  parentRefs: [{name: gateway}]
  rules:
    - backendRefs: [{name: hello, port: 80}]
`;

const routeRule = { apiGroups: ["gateway.networking.k8s.io"], resources: ["httproutes"], verbs: ["get", "list", "patch"] };

interface Obj {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    replicas?: number;
    selector?: Record<string, unknown>;
    template?: { metadata?: { labels?: Record<string, string> } };
    rules?: { matches?: unknown[]; backendRefs: { name: string; weight?: number }[] }[];
  };
}

/**
 * Percentage rollouts on a real Kubernetes control plane (test/support/kube) with the Gateway API's
 * own HTTPRoute CRD (sigs.k8s.io/gateway-api from the Go module proxy, scripts/ci/gateway-api.sh):
 * a candidate Deployment and Service beside the stable ones, weights on the HTTPRoute's
 * backendRefs, testers by a header rule, replicas in proportion without a route, promote and revert.
 */
describe("kubernetes plugin: canary slots and Gateway API weights", () => {
  let cp: KubeControlPlane;
  let access: ClusterAccess;
  let reader: ClusterAccess;
  let files: Awaited<ReturnType<typeof scratch>>;
  const d = new KubernetesDeployer(memoryLogger());
  const artifacts: Record<string, string> = {};

  before(async () => {
    cp = await KubeControlPlane.start({ pullableImages });
    const { stdout } = await run("bash", [join(repoRoot, "scripts/ci/gateway-api.sh")]);
    const crd = await readFile(join(stdout.trim(), "gateway.networking.k8s.io_httproutes.yaml"), "utf8");
    await cp.admin.applyYaml(crd);
    await cp.admin.waitFor("the HTTPRoute CRD to be served", async () => {
      try {
        await cp.admin.list("gateway.networking.k8s.io/v1", "HTTPRoute", "default");
        return true;
      } catch {
        return undefined;
      }
    });
    access = await cp.serviceAccount("hello", "manent", [...tutorialRoleRules, routeRule]);
    reader = await cp.serviceAccount("hello", "reader", [...tutorialRoleRules, { ...routeRule, verbs: ["get", "list"] }]);
    await cp.admin.applyYaml(routeManifest);
    files = await scratch();
    for (const v of ["1.0.0", "1.1.0", "1.2.0"]) artifacts[v] = await files.write(`hello-${v}.yaml`, helloManifest);
    artifacts["1.3.0"] = await files.write("hello-1.3.0.yaml", stuckManifest(2));
  });
  after(async () => {
    await cp?.stop();
    await files?.cleanup();
  });

  const req = (version: string, params: Record<string, string> = {}, traffic?: Record<string, string>, who = access): Request => {
    const r = makeRequest({
      clusters: [cp],
      access: [who],
      artifactPath: artifacts[version]!,
      version,
      params: { "var.REPLICAS": "4", ...params },
    });
    return traffic ? { ...r, traffic } : r;
  };
  const deployment = async (name: string) => (await getObj(cp, "apps/v1", "Deployment", name)) as unknown as Obj | undefined;
  const service = async (name: string) => (await getObj(cp, "v1", "Service", name)) as unknown as Obj | undefined;
  const route = async () => (await getObj(cp, "gateway.networking.k8s.io/v1", "HTTPRoute", "hello")) as unknown as Obj;
  const weights = async () => (await route()).spec.rules!.map((r) => r.backendRefs.map((b) => `${b.name}=${b.weight ?? "-"}`).join(" "));
  /** The application's Deployments and Services in the namespace, by kind/name. */
  const owned = async () => {
    const sel = "manent.io/application=hello";
    const deployments = (await cp.list("apps/v1", "Deployment", "hello", sel)).map((o) => `Deployment/${String(o.metadata.name)}`);
    const services = (await cp.list("v1", "Service", "hello", sel)).map((o) => `Service/${String(o.metadata.name)}`);
    return [...deployments, ...services].sort();
  };
  const version = async (name: string) => (await deployment(name))?.metadata.annotations?.["manent.io/version"];

  it("weights on the HTTPRoute, testers by header, replicas in proportion; promote leaves exactly the stable objects; rollback still works", async () => {
    const withRoute = { traffic_route: "hello" };
    await d.deploy(req("1.0.0", withRoute));
    const traffic = await d.prepareSlots(req("1.1.0", withRoute));
    assert.equal(traffic[`replicas/${cp.host}:${cp.port}/hello`], "4");
    assert.equal(traffic["route"], "hello");
    const r = req("1.1.0", withRoute, traffic);

    await d.deployCandidate(r);
    assert.equal(await version("hello"), "1.0.0", "the stable Deployment is untouched");
    assert.equal(await version("hello-canary"), "1.1.0");
    const cand = (await deployment("hello-canary"))!;
    assert.equal(cand.metadata.labels?.["manent.io/slot"], "canary");
    assert.equal(cand.metadata.labels?.["manent.io/application"], "hello");
    assert.deepEqual(cand.spec.selector, { matchLabels: { app: "hello", "manent.io/slot": "canary" } });
    assert.equal(cand.spec.replicas, 1);
    assert.deepEqual((await service("hello-canary"))!.spec.selector, { app: "hello", "manent.io/slot": "canary" });

    const testers = await d.routeTesters(r);
    assert.deepEqual(testers, { route: "hello", header: "X-Canary: always" });
    assert.deepEqual(await weights(), ["hello-canary=1", "hello=1 hello-canary=0"]);
    // The CRD's defaults add a path match (PathPrefix /) beside the header.
    assert.deepEqual(
      ((await route()).spec.rules![0]!.matches as { headers?: unknown }[]).map((m) => m.headers),
      [[{ type: "Exact", name: "X-Canary", value: "always" }]],
    );

    // The rule's one backend has weight 1 (the CRD's default): its share is split, in the smallest whole numbers.
    for (const [weight, replicas, split] of [
      [10, 1, "hello=9 hello-canary=1"],
      [50, 2, "hello=1 hello-canary=1"],
      [100, 4, "hello=0 hello-canary=1"],
    ] as const) {
      await d.scaleCandidate(r, weight);
      await d.setCandidateWeight(r, weight);
      assert.deepEqual(await weights(), ["hello-canary=1", split]);
      assert.equal((await deployment("hello-canary"))!.spec.replicas, replicas);
      assert.equal((await deployment("hello"))!.spec.replicas, 4);
      assert.equal(await d.candidateWeight(r), weight);
    }

    await d.promoteCandidate(r);
    await d.retirePrevious(r);
    assert.equal(await version("hello"), "1.1.0");
    assert.equal((await deployment("hello"))!.spec.replicas, 4);
    assert.equal(await deployment("hello-canary"), undefined);
    assert.equal(await service("hello-canary"), undefined);
    assert.deepEqual(await weights(), ["hello=1"]);
    assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"], "exactly the stable objects");
    assert.deepEqual(
      (await d.currentRelease(r)).map((x) => x.version),
      ["1.1.0"],
    );

    // History and rollback after a promoted canary: back to 1.0.0.
    const rolled = await d.rollback(rollbackRequest(req("1.1.0", withRoute), [{ host: cp.host, version: "1.0.0" }]));
    assert.equal(rolled.targets[0]!.status, "rolled_back");
    assert.equal(await version("hello"), "1.0.0");
  });

  it("revert removes the candidate and its weight, leaving exactly the stable objects", async () => {
    const withRoute = { traffic_route: "hello" };
    const traffic = await d.prepareSlots(req("1.2.0", withRoute));
    const r = req("1.2.0", withRoute, traffic);
    await d.deployCandidate(r);
    await d.routeTesters(r);
    await d.scaleCandidate(r, 50);
    await d.setCandidateWeight(r, 50);
    assert.equal((await deployment("hello-canary"))!.spec.replicas, 2);
    // The engine's abort: weight 0, then RevertCandidate.
    await d.setCandidateWeight(r, 0);
    await d.revertCandidate(r);
    assert.equal(await deployment("hello-canary"), undefined);
    assert.equal(await service("hello-canary"), undefined);
    assert.deepEqual(await weights(), ["hello=1"]);
    assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"], "exactly the stable objects");
    assert.equal(await version("hello"), "1.0.0");
  });

  it("without a route, the weight is the candidate's share of the stable Service's ready endpoints; the stable gets its pods back", async () => {
    const traffic = await d.prepareSlots(req("1.2.0"));
    const r = req("1.2.0", {}, traffic);
    await d.deployCandidate(r);
    assert.equal((await deployment("hello-canary"))!.spec.replicas, 0);
    assert.equal(await service("hello-canary"), undefined, "no candidate Service: the stable one selects the candidate pods too");
    const podLabels = (await deployment("hello-canary"))!.spec.template?.metadata?.labels;
    assert.equal(podLabels?.["app"], "hello");
    /** The ready endpoints of the stable Service hello, as its EndpointSlices list them: candidate pods and the others. */
    const endpoints = async () => {
      const slices = await cp.list("discovery.k8s.io/v1", "EndpointSlice", "hello", "kubernetes.io/service-name=hello");
      const pods = slices.flatMap((s) =>
        ((s as { endpoints?: { conditions?: { ready?: boolean }; targetRef?: { name?: string } }[] }).endpoints ?? [])
          .filter((e) => e.conditions?.ready)
          .map((e) => e.targetRef?.name ?? ""),
      );
      const candidate = pods.filter((p) => p.startsWith("hello-canary-")).length;
      return { candidate, stable: pods.length - candidate };
    };
    /** Waits until the endpoint controller has caught up with the Deployments' replicas. */
    const settled = (candidate: number, stable: number) =>
      cp.admin.waitFor(`${candidate} candidate and ${stable} stable endpoints`, async () => {
        const e = await endpoints();
        return e.candidate === candidate && e.stable === stable ? e : undefined;
      });
    // 4 pods divided: the candidate's share of the endpoints is the weight (to the nearest pod, at least one each).
    for (const [weight, candidate, stable] of [
      [10, 1, 3],
      [25, 1, 3],
      [50, 2, 2],
      [75, 3, 1],
      [90, 3, 1],
      [100, 4, 0],
      [50, 2, 2],
    ] as const) {
      await d.scaleCandidate(r, weight);
      assert.equal((await deployment("hello-canary"))!.spec.replicas, candidate, `candidate replicas at ${weight} %`);
      assert.equal((await deployment("hello"))!.spec.replicas, stable, `stable replicas at ${weight} %`);
      await settled(candidate, stable);
      assert.equal(await d.candidateWeight(r), Math.round((100 * candidate) / 4));
    }
    // The engine's abort: weight 0, then RevertCandidate. The stable Deployment gets its 4 pods back,
    // and manent-canary's claim on its replicas goes, so the next apply of the release owns them.
    await d.scaleCandidate(r, 0);
    await settled(0, 4);
    await d.revertCandidate(r);
    assert.equal(await deployment("hello-canary"), undefined);
    assert.equal((await deployment("hello"))!.spec.replicas, 4);
    assert.ok(!specManagers((await getObj(cp, "apps/v1", "Deployment", "hello"))!).some((m) => m.startsWith("manent-canary")));
    assert.equal(await version("hello"), "1.0.0");

    // A promote from 100 %: the release's apply with other replicas (6) is not refused by the canary's claim.
    const six = req("1.2.0", { "var.REPLICAS": "6" });
    const r6 = { ...six, traffic: await d.prepareSlots(six) };
    await d.deployCandidate(r6);
    await d.scaleCandidate(r6, 100);
    await settled(4, 0);
    await d.promoteCandidate(r6);
    assert.equal(await version("hello"), "1.2.0");
    assert.equal((await deployment("hello"))!.spec.replicas, 6);
    await settled(0, 6);
    assert.ok(!specManagers((await getObj(cp, "apps/v1", "Deployment", "hello"))!).some((m) => m.startsWith("manent-canary")));
    // Back to 1.0.0 with 4 replicas for the next tests.
    const rolled = await d.rollback(rollbackRequest(req("1.2.0"), [{ host: cp.host, version: "1.0.0" }]));
    assert.equal(rolled.targets[0]!.status, "rolled_back");
    assert.equal((await deployment("hello"))!.spec.replicas, 4);
  });

  it("a candidate that never becomes ready is removed by the revert, also with a token that may not patch the route", async () => {
    for (const who of [access, reader]) {
      const withRoute = { traffic_route: "hello" };
      const traffic = await d.prepareSlots(req("1.3.0", withRoute, undefined, who));
      const r = req("1.3.0", withRoute, traffic, who);
      const stuck = await d.deployCandidate(r).then(
        () => assert.fail("a candidate with a missing image became ready"),
        (e: unknown) => ManentError.from(e),
      );
      assert.match(stuck.message, /rollout stuck/);
      assert.ok(await deployment("hello-canary"), "the stuck candidate is there");
      // The engine's revert: weight 0 (nothing to wait for at 0), then RevertCandidate.
      await d.scaleCandidate(r, 0);
      if (who === access) await d.setCandidateWeight(r, 0);
      await d.revertCandidate(r);
      assert.equal(await deployment("hello-canary"), undefined);
      assert.equal(await service("hello-canary"), undefined);
      assert.deepEqual(await weights(), ["hello=1"]);
      assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"], "exactly the stable objects");
      assert.equal(await version("hello"), "1.0.0");
    }
  });

  /** A namespace with the route to `hello` and a token for it, where no release was ever deployed. */
  const fresh = async (ns: string) => {
    const who = await cp.serviceAccount(ns, "manent", [...tutorialRoleRules, routeRule]);
    await cp.admin.applyYaml(routeManifest.replace("namespace: hello", `namespace: ${ns}`));
    const params = { traffic_route: "hello", namespace: ns };
    const inNs = {
      deployment: async (name: string) => (await getObj(cp, "apps/v1", "Deployment", name, ns)) as unknown as Obj | undefined,
      service: async (name: string) => (await getObj(cp, "v1", "Service", name, ns)) as unknown as Obj | undefined,
      weights: async () =>
        ((await getObj(cp, "gateway.networking.k8s.io/v1", "HTTPRoute", "hello", ns)) as unknown as Obj).spec.rules!.map((r) =>
          r.backendRefs.map((b) => `${b.name}=${b.weight ?? "-"}`).join(" "),
        ),
      owned: async () => {
        const sel = "manent.io/application=hello";
        const deployments = (await cp.list("apps/v1", "Deployment", ns, sel)).map((o) => `Deployment/${String(o.metadata.name)}`);
        const services = (await cp.list("v1", "Service", ns, sel)).map((o) => `Service/${String(o.metadata.name)}`);
        return [...deployments, ...services].sort();
      },
    };
    return { who, params, ...inNs };
  };

  it("a first canary, with no release in service, deploys the release in full and weights no Service that does not exist", async () => {
    const { who, params, deployment, service, weights, owned } = await fresh("first");
    const routeBefore = await weights();
    const traffic = await d.prepareSlots(req("1.0.0", params, undefined, who));
    const r = req("1.0.0", params, traffic, who);
    const deployed = await d.deployCandidate(r);
    assert.equal(deployed.targets[0]!.status, "deployed");
    assert.equal(deployed.targets[0]!.details?.["first_release"], "true");
    // The release itself, under its own names: the route's stable backend now exists.
    assert.equal((await deployment("hello"))?.metadata.annotations?.["manent.io/version"], "1.0.0");
    assert.ok(await service("hello"));
    assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"], "no candidate objects");

    await d.routeTesters(r);
    for (const weight of [10, 50, 100]) {
      await d.scaleCandidate(r, weight);
      await d.setCandidateWeight(r, weight);
      assert.deepEqual(await weights(), routeBefore, `weight ${weight} leaves the route as it was`);
      assert.equal(await d.candidateWeight(r), 100, "the first release has all the traffic");
    }
    await d.promoteCandidate(r);
    await d.retirePrevious(r);
    assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"]);
    assert.equal((await deployment("hello"))!.spec.replicas, 4);
    assert.deepEqual(await weights(), routeBefore);
    assert.deepEqual(
      (await d.currentRelease(r)).map((x) => x.version),
      ["1.0.0"],
    );
    // The next canary there is a real one: a candidate beside the stable release.
    const next = await d.prepareSlots(req("1.1.0", params, undefined, who));
    assert.equal(next[`stable_version/${cp.host}:${cp.port}`], "1.0.0");
    await d.deployCandidate(req("1.1.0", params, next, who));
    assert.deepEqual(await owned(), ["Deployment/hello", "Deployment/hello-canary", "Service/hello", "Service/hello-canary"]);
    await d.revertCandidate(req("1.1.0", params, next, who));
    assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"]);
  });

  it("a first canary aborted removes the release it deployed, as a rollback to nothing; its dry-run says so", async () => {
    const { who, params, weights, owned } = await fresh("first-abort");
    const routeBefore = await weights();
    const dry = await d.dryRun({ ...req("1.0.0", params, undefined, who), rollout: { weights: true, testers: false } });
    assert.match(dry.targets[0]!.details?.["canary"] ?? "", /no release in service: the first release is deployed in full/);
    assert.equal((await d.dryRun(req("1.0.0", params, undefined, who))).targets[0]!.details?.["canary"], undefined);

    const traffic = await d.prepareSlots(req("1.0.0", params, undefined, who));
    const r = req("1.0.0", params, traffic, who);
    await d.deployCandidate(r);
    await d.setCandidateWeight(r, 50);
    // The engine's revert: weight 0, then RevertCandidate.
    await d.scaleCandidate(r, 0);
    await d.setCandidateWeight(r, 0);
    await d.revertCandidate(r);
    assert.deepEqual(await owned(), [], "nothing of the release is left");
    assert.deepEqual(await weights(), routeBefore, "the route is as its admin wrote it");
    assert.deepEqual(
      (await d.currentRelease(r)).map((x) => x.version),
      [""],
    );
  });

  it("dry-run checks the route: a token that cannot patch the HTTPRoute gets the 403 in the dry-run", async () => {
    const ok = await d.dryRun(req("1.2.0", { traffic_route: "hello" }));
    assert.equal(ok.targets[0]!.status, "ready");
    const missing = await d.dryRun(req("1.2.0", { traffic_route: "nope" })).then(
      () => assert.fail("a missing route passed"),
      (e: unknown) => ManentError.from(e),
    );
    assert.match(missing.message, /HTTPRoute hello\/nope \(param traffic_route\) does not exist/);
    const forbidden = await d.dryRun(req("1.2.0", { traffic_route: "hello" }, undefined, reader)).then(
      () => assert.fail("dry-run passed without patch on the route"),
      (e: unknown) => ManentError.from(e),
    );
    assert.match(
      forbidden.message,
      /HTTPRoute\/hello\/hello: forbidden: the token lacks permission "patch" on "httproutes(\.gateway\.networking\.k8s\.io)?"/,
    );
    assert.deepEqual(await weights(), ["hello=1"], "the dry-run changed nothing");
  });
  it("a rule with other backends: only the stable backend's share is split, and the rule comes back exactly after an abort and a promote", async () => {
    // The admin's route: 80 % to hello and 20 % to another service; a second rule 1:3.
    await cp.admin.apply({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "HTTPRoute",
      metadata: { name: "split", namespace: "hello" },
      spec: {
        parentRefs: [{ name: "gateway" }],
        rules: [
          {
            backendRefs: [
              { name: "hello", port: 80, weight: 80 },
              { name: "other", port: 80, weight: 20 },
            ],
          },
          {
            matches: [{ path: { type: "PathPrefix", value: "/api" } }],
            backendRefs: [
              { name: "hello", port: 80 },
              { name: "other", port: 80, weight: 3 },
            ],
          },
        ],
      },
    });
    const split = async () =>
      ((await getObj(cp, "gateway.networking.k8s.io/v1", "HTTPRoute", "split")) as unknown as Obj).spec.rules!.map((r) =>
        r.backendRefs.map((b) => `${b.name}=${b.weight ?? "-"}`).join(" "),
      );
    const before = ["hello=80 other=20", "hello=1 other=3"];
    assert.deepEqual(await split(), before);
    const withRoute = { traffic_route: "split" };
    for (const end of ["abort", "promote"] as const) {
      const v = end === "abort" ? "1.2.0" : "1.1.0";
      const traffic = await d.prepareSlots(req(v, withRoute));
      const r = req(v, withRoute, traffic);
      await d.deployCandidate(r);
      await d.routeTesters(r);
      assert.deepEqual(await split(), ["hello-canary=1", "hello=80 hello-canary=0 other=20", "hello=1 hello-canary=0 other=3"]);
      for (const [weight, expected] of [
        [10, ["hello=72 hello-canary=8 other=20", "hello=9 hello-canary=1 other=30"]],
        [25, ["hello=60 hello-canary=20 other=20", "hello=3 hello-canary=1 other=12"]],
        [50, ["hello=40 hello-canary=40 other=20", "hello=1 hello-canary=1 other=6"]],
        [100, ["hello=0 hello-canary=80 other=20", "hello=0 hello-canary=1 other=3"]],
      ] as const) {
        await d.scaleCandidate(r, weight);
        await d.setCandidateWeight(r, weight);
        assert.deepEqual(await split(), ["hello-canary=1", ...expected], `at ${weight} %`);
        assert.equal(await d.candidateWeight(r), weight);
      }
      if (end === "abort") {
        await d.setCandidateWeight(r, 0);
        await d.revertCandidate(r);
      } else {
        await d.promoteCandidate(r);
        await d.retirePrevious(r);
      }
      assert.deepEqual(await split(), before, `the admin's rules after the ${end}`);
      assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"], "exactly the stable objects");
    }
    assert.equal(await version("hello"), "1.1.0");
    await cp.admin.delete("gateway.networking.k8s.io/v1", "HTTPRoute", "hello", "split");
  });
  it("set_header_route and set_mirror: a header or cookie rule before the weighted rules and a RequestMirror filter to the candidate, per step; the route comes back byte for byte after an abort and a promote", async () => {
    const spec = {
      parentRefs: [{ name: "gateway" }],
      rules: [
        {
          backendRefs: [
            { name: "hello", port: 80, weight: 80 },
            { name: "other", port: 80, weight: 20 },
          ],
        },
        { matches: [{ path: { type: "PathPrefix", value: "/api" } }], backendRefs: [{ name: "hello", port: 80 }] },
      ],
    };
    await cp.admin.apply({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "HTTPRoute",
      metadata: { name: "ab", namespace: "hello" },
      spec,
    });
    type Rule = { matches?: { headers?: unknown }[]; filters?: unknown[]; backendRefs: { name: string; weight?: number }[] };
    const abSpec = async () => ((await getObj(cp, "gateway.networking.k8s.io/v1", "HTTPRoute", "ab")) as unknown as { spec: unknown }).spec;
    const rules = async () => (await abSpec()) as { rules: Rule[] };
    const before = JSON.stringify(await abSpec());
    const mirror = { type: "RequestMirror", requestMirror: { backendRef: { group: "", kind: "Service", name: "hello-canary", port: 80 } } };
    const withRoute = { traffic_route: "ab" };
    for (const end of ["abort", "promote"] as const) {
      const v = end === "abort" ? "1.2.0" : "1.0.0";
      const traffic = await d.prepareSlots(req(v, withRoute));
      const r = req(v, withRoute, traffic);
      await d.deployCandidate(r);
      await d.scaleCandidate(r, 10);
      await d.setCandidateWeight(r, 10);
      await d.setHeaderRoute(r, { type: "header", name: "X-Beta", value: "on" });
      let now = (await rules()).rules;
      assert.equal(now.length, 3, "one rule added");
      assert.deepEqual(
        now[0]!.matches?.map((m) => m.headers),
        [[{ type: "Exact", name: "X-Beta", value: "on" }]],
      );
      assert.deepEqual(
        now[0]!.backendRefs.map((b) => `${b.name}=${b.weight}`),
        ["hello-canary=1"],
      );
      assert.deepEqual(
        now.slice(1).map((x) => x.backendRefs.map((b) => `${b.name}=${b.weight}`).join(" ")),
        ["hello=72 hello-canary=8 other=20", "hello=9 hello-canary=1"],
      );
      // The next weight keeps the header rule; a cookie match replaces it.
      await d.scaleCandidate(r, 25);
      await d.setCandidateWeight(r, 25);
      assert.deepEqual(
        (await rules()).rules[0]!.matches?.map((m) => m.headers),
        [[{ type: "Exact", name: "X-Beta", value: "on" }]],
      );
      await d.setHeaderRoute(r, { type: "cookie", name: "beta", value: "y.es+1" });
      now = (await rules()).rules;
      assert.equal(now.length, 3, "the match replaced, not added");
      assert.deepEqual(
        now[0]!.matches?.map((m) => m.headers),
        [[{ type: "RegularExpression", name: "Cookie", value: "(^|;\\s*)beta=y\\.es\\+1(;|$)" }]],
      );
      assert.ok(new RegExp(String((now[0]!.matches![0]!.headers as { value: string }[])[0]!.value)).test("a=1; beta=y.es+1; c=2"));
      assert.ok(!new RegExp(String((now[0]!.matches![0]!.headers as { value: string }[])[0]!.value)).test("xbeta=y.es+1; beta=yxes+1"));

      await d.setMirror(r, 100);
      now = (await rules()).rules;
      assert.equal(now[0]!.filters, undefined, "the header rule has no mirror");
      assert.deepEqual(
        now.slice(1).map((x) => x.filters),
        [[mirror], [mirror]],
      );
      await d.scaleCandidate(r, 50);
      await d.setCandidateWeight(r, 50);
      now = (await rules()).rules;
      assert.deepEqual(
        now.slice(1).map((x) => x.filters),
        [[mirror], [mirror]],
        "the weight keeps the mirror",
      );
      assert.equal(now.length, 3, "and the header rule");
      await d.setMirror(r, 0);
      assert.deepEqual(
        (await rules()).rules.map((x) => x.filters),
        [undefined, undefined, undefined],
      );
      await assert.rejects(d.setMirror(r, 50), (e: unknown) => e instanceof ManentError && e.code === Code.Unimplemented);
      await d.setMirror(r, 100);
      await d.setHeaderRoute(r, null);
      now = (await rules()).rules;
      assert.equal(now.length, 2, "false removes the header rule");
      assert.deepEqual(
        now.map((x) => x.filters),
        [[mirror], [mirror]],
      );
      await d.setHeaderRoute(r, { type: "header", name: "X-Beta", value: "on" });
      assert.equal((await rules()).rules.length, 3);
      if (end === "abort") {
        await d.setCandidateWeight(r, 0);
        await d.revertCandidate(r);
      } else {
        await d.promoteCandidate(r);
        await d.retirePrevious(r);
      }
      assert.equal(JSON.stringify(await abSpec()), before, `the admin's route after the ${end}`);
      assert.deepEqual(await owned(), ["Deployment/hello", "Service/hello"], "exactly the stable objects");
    }
    await cp.admin.delete("gateway.networking.k8s.io/v1", "HTTPRoute", "hello", "ab");
  });

  it("validate (run before every dry-run and deploy): header routes and mirroring need traffic_route, a mirror percentage other than 0 or 100 and session affinity are refused as unimplemented", async () => {
    const plan = { weights: true, testers: false };
    const unimplemented = (field: string) => (e: unknown) =>
      e instanceof ManentError && e.code === Code.Unimplemented && e.message.includes(field) && /no percent/.test(e.message);
    await assert.rejects(
      d.validate({ ...req("1.2.0"), rollout: { ...plan, headerRoutes: true } }),
      (e: unknown) =>
        e instanceof ManentError && e.code === Code.InvalidArgument && /param traffic_route.*set_header_route/.test(e.message),
    );
    await assert.rejects(
      d.validate({ ...req("1.2.0"), rollout: { ...plan, mirror: true, mirrorPercents: [100] } }),
      (e: unknown) => e instanceof ManentError && e.code === Code.InvalidArgument && /param traffic_route.*set_mirror/.test(e.message),
    );
    await assert.rejects(
      d.validate({ ...req("1.2.0", { traffic_route: "hello" }), rollout: { ...plan, mirror: true, mirrorPercents: [100, 20] } }),
      unimplemented("set_mirror: 20"),
    );
    await d.validate({
      ...req("1.2.0", { traffic_route: "hello" }),
      rollout: { ...plan, headerRoutes: true, mirror: true, mirrorPercents: [100, 0] },
    });
    const caps = capabilitiesOf(d);
    assert.ok(caps.includes("header_route") && caps.includes("mirror"));
    assert.ok(!caps.includes("session_affinity"), "the standard CRDs have no sessionPersistence");
    const rollout = rolloutSchema.parse({ canary: { session_affinity: true, steps: [{ set_weight: 10 }] } });
    assert.throws(
      () => checkRolloutSettings(rollout, undefined, "kubernetes", caps, "envconfig.yml"),
      (e: unknown) =>
        e instanceof ManentError && e.code === Code.Unimplemented && e.message.includes("envconfig.yml: rollout.canary.session_affinity"),
    );
  });
});
