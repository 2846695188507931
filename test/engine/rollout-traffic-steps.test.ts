import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ManentError } from "../../src/core/errors.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { deployCalls } from "../support/journal.js";
import type { TestPostgres } from "../support/postgres.js";
import { ServerFixture } from "../support/server-fixture.js";
import { descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * `set_header_route` and `set_mirror` steps and `session_affinity` (issue 22, items 9 and 10)
 * through a real manent-server and the noop plugin's slot calls: the calls in the order of the
 * steps, and the refusals at submission (and dry-run) of a plugin lacking a capability and of a
 * malformed step, naming the file and the field.
 */
describe("rollout canary: header routes, mirroring, session affinity", () => {
  const fx = new ServerFixture();
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let artifact: string;

  const calls = (id: string) => deployCalls(ws.path("journal"), id);
  const envconfig = (app: string, canary: Record<string, unknown>) =>
    ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      retry_interval: "10ms",
      rollout: { canary },
    });
  const submit = (api: ServerProcess["api"], app: string, extra: Record<string, unknown> = {}) =>
    api.submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml`, ...extra });

  before(async () => {
    ({ pg, ws, server, artifact } = await fx.start("traffic\n", { plugins: { noop: { artifact_types: ["file"], without: ["scale"] } } }));
  });
  after(() => fx.stop());

  it("runs each step as its plugin call, in order, and tells the plugin about session affinity", async () => {
    await envconfig("shape", {
      session_affinity: true,
      steps: [
        { set_weight: 10 },
        { set_header_route: { header: { name: "X-Beta", value: "on" } } },
        { set_mirror: 20 },
        { set_header_route: { cookie: { name: "beta", value: "yes" } } },
        { set_header_route: false },
        { set_mirror: 0 },
        { set_weight: 50 },
      ],
    });
    const { id } = await submit(server.api, "shape");
    const d = await server.api.deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(d.rollout!.canary!.steps, [
      "set_weight 10",
      "set_header_route header X-Beta=on",
      "set_mirror 20",
      "set_header_route cookie beta=yes",
      "set_header_route off",
      "set_mirror 0",
      "set_weight 50",
    ]);
    assert.deepEqual(await calls(id), [
      "prepare_slots session_affinity",
      "deploy_candidate",
      "set_candidate_weight weight=10",
      "set_header_route header X-Beta=on",
      "set_mirror percent=20",
      "set_header_route cookie beta=yes",
      "set_header_route off",
      "set_mirror percent=0",
      "set_candidate_weight weight=50",
      "promote_candidate",
      "retire_previous",
    ]);
    assert.deepEqual(
      d.steps.filter((s) => /canary-\d+:set_(header_route|mirror)$/.test(s.name)).map((s) => s.name),
      ["canary-2:set_header_route", "canary-3:set_mirror", "canary-4:set_header_route", "canary-5:set_header_route", "canary-6:set_mirror"],
    );
  });

  it("refuses malformed steps at submission, naming the file and the field", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { set_header_route: { header: { name: "X-Beta", value: "on" }, cookie: { name: "b", value: "1" } } },
        /bad\/prod\.yml: rollout\.canary\.steps\.0\.set_header_route: set exactly one of header or cookie/,
      ],
      [
        { set_header_route: { header: { name: "X Beta", value: "on" } } },
        /bad\/prod\.yml: rollout\.canary\.steps\.0\.set_header_route\.header\.name: must be letters, digits and _\.-/,
      ],
      [
        { set_header_route: { cookie: { name: "beta", value: "a;b" } } },
        /bad\/prod\.yml: rollout\.canary\.steps\.0\.set_header_route\.cookie\.value: must be letters, digits/,
      ],
      [{ set_mirror: 101 }, /bad\/prod\.yml: rollout\.canary\.steps\.0\.set_mirror: Too big/],
      // A wrong value of a step is named as such, not as an unknown field (the approval step's shape matched anything).
      [{ set_weight: "ten" }, /bad\/prod\.yml: rollout\.canary\.steps\.0\.set_weight: expected a number, got a string/],
      [{ pause: "soon" }, /bad\/prod\.yml: rollout\.canary\.steps\.0\.pause: "soon" is not a duration \(use e\.g\. 30s/],
      [{ webhook: {} }, /bad\/prod\.yml: rollout\.canary\.steps\.0\.webhook\.url: /],
      [{ analysis: {} }, /bad\/prod\.yml: rollout\.canary\.steps\.0\.analysis\.checks: is required/],
    ];
    for (const [step, message] of cases) {
      await envconfig("bad", { steps: [step] });
      await assert.rejects(submit(server.api, "bad"), message, JSON.stringify(step));
    }
    assert.deepEqual(
      (await server.api.list({})).deploys.filter((d) => d.application === "bad"),
      [],
    );
  });

  it("a plugin without header_route, mirror or session_affinity: the deploy and the dry-run are refused as unimplemented", async () => {
    const other = await startServer(
      await ws.write(
        "manent-plain.yml",
        manentYml(await pg.createDatabase(), {
          plugins: { noop: { artifact_types: ["file"], without: ["header_route", "mirror", "session_affinity"] } },
        }),
      ),
      { cwd: ws.dir },
    );
    try {
      const cases: [Record<string, unknown>, RegExp][] = [
        [
          { steps: [{ set_weight: 10 }, { set_header_route: { header: { name: "X-Beta", value: "on" } } }] },
          /plain\/prod\.yml: rollout\.canary\.steps\.1\.set_header_route: plugin noop cannot send requests to the candidate by header or cookie \(it does not declare the header_route capability/,
        ],
        [
          { steps: [{ set_mirror: 5 }] },
          /plain\/prod\.yml: rollout\.canary\.steps\.0\.set_mirror: plugin noop cannot copy requests to the candidate \(mirroring\)/,
        ],
        [
          { session_affinity: true, steps: [{ set_weight: 10 }] },
          /plain\/prod\.yml: rollout\.canary\.session_affinity: plugin noop cannot keep a client on the version it first reached/,
        ],
      ];
      for (const [canary, message] of cases) {
        await envconfig("plain", canary);
        for (const extra of [{}, { dry_run: true }]) {
          await assert.rejects(submit(other.api, "plain", extra), (e: ManentError) => {
            assert.match(e.message, message);
            assert.equal(e.code, Code.Unimplemented);
            return true;
          });
        }
      }
      assert.deepEqual((await other.api.list({})).deploys, []);
    } finally {
      await other.stop();
    }
  });
});
