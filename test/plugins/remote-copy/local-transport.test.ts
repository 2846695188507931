import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ManentError, ResultError, capabilitiesOf } from "../../../src/plugin.js";
import { remoteCopyFactory } from "../../../src/plugins/remote-copy/index.js";
import { parseParams } from "../../../src/plugins/remote-copy/params.js";
import { currentOf, makeFile, makeTarball, RecordingLogger, request, rollbackRequest, type TestArtifact } from "./helpers.js";

const targets = [
  { host: "web-1", labels: {} },
  { host: "web-2", labels: {} },
];

async function plugin() {
  const d = await remoteCopyFactory({}, new RecordingLogger());
  return d as typeof d &
    Required<Pick<import("../../../src/plugin.js").Rollbacker, "rollback">> &
    import("../../../src/plugin.js").ReleaseInspector &
    import("../../../src/plugin.js").DryRunner;
}

describe("remote-copy, local transport", () => {
  let dir: string;
  let base: string;
  let params: Record<string, string>;
  const art: Record<string, TestArtifact> = {};

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "manent-rc-local-"));
    base = join(dir, "hosts", "{host}", "app");
    // activate leaves a trace of each run next to the releases, so tests see it ran (and where).
    params = {
      transport: "local",
      base,
      keep_releases: "3",
      activate:
        'test "$PWD" = "$MANENT_RELEASE_DIR" && echo "$MANENT_VERSION $MANENT_ENVIRONMENT $MANENT_APPLICATION" >> ../../activations.log',
    };
    for (const v of ["1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"]) art[v] = await makeTarball(dir, v);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const baseOf = (host: string): string => base.replace("{host}", host);
  const activations = async (host: string): Promise<string[]> =>
    (await readFile(join(baseOf(host), "activations.log"), "utf8").catch(() => "")).split("\n").filter(Boolean);

  it("declares its capabilities", async () => {
    const d = await plugin();
    assert.equal(d.name(), "remote-copy");
    assert.deepEqual(capabilitiesOf(d).sort(), [
      "current_release",
      "drift",
      "dry_run",
      "header_route",
      "parallel_targets",
      "rollback",
      "session_affinity",
      "slots",
      "testers",
      "traffic_router",
    ]);
  });

  it("takes a relative base with transport local as the server's, as its workdir", () => {
    assert.equal(parseParams({ transport: "local", base: "targets/{host}" }).base, join(process.cwd(), "targets/{host}"));
    assert.equal(parseParams({ transport: "local", base: "/srv/{host}/" }).base, "/srv/{host}");
  });

  it("validates params, naming the bad one", async () => {
    const d = await plugin();
    const bad = async (p: Record<string, string>, name: string) => {
      await assert.rejects(d.validate(request({ artifact: art["1.0.0"]!, targets, params: p })), (err: ManentError) => {
        assert.equal(err.code, Code.InvalidArgument);
        assert.match(err.message, new RegExp(`param ${name}`));
        return true;
      });
    };
    await bad({ ...params, base: "../dir" }, "base");
    await bad({ transport: "ssh", base: "relative/dir", user: "deploy", host_key_fingerprint: `SHA256:${"A".repeat(43)}` }, "base");
    await bad({ ...params, keep_releases: "1" }, "keep_releases");
    await bad({ ...params, activate_timeout: "soon" }, "activate_timeout");
    await bad({ ...params, transport: "ftp" }, "transport");
    // A misspelt param is refused, not ignored with its default used instead.
    await bad({ ...params, keep_release: "3" }, '"keep_release" \\(known: transport, base, keep_releases');
    await bad({ ...params, base: join(dir, "shared") }, "base");
    await bad({ transport: "ssh", base: "/srv/app", user: "deploy" }, "known_hosts_secret");
    await bad(
      {
        transport: "ssh",
        base: "/srv/app",
        known_hosts_secret: "kh",
        host_key_fingerprint: "MD5:aa",
      },
      "host_key_fingerprint",
    );
  });

  it("dry-runs without touching the targets", async () => {
    const d = await plugin();
    const r = await d.dryRun(request({ artifact: art["1.0.0"]!, targets, params }));
    assert.deepEqual(
      r.targets.map((t) => t.status),
      ["ready", "ready"],
    );
    await assert.rejects(stat(join(dir, "hosts")), /ENOENT/);
  });

  it("deploys a first version to two targets", async () => {
    const d = await plugin();
    const a = art["1.0.0"]!;
    const r = await d.deploy(request({ artifact: a, targets, params, parallelism: 2 }));
    const size = (await stat(a.path)).size;
    for (const [i, host] of ["web-1", "web-2"].entries()) {
      const t = r.targets[i]!;
      assert.equal(t.host, host);
      assert.equal(t.status, "deployed");
      assert.equal(t.details?.previous_version, "");
      assert.equal(t.details?.bytes_sent, String(size));
      assert.equal(t.details?.release_path, join(baseOf(host), "releases", "1.0.0"));
      assert.equal(typeof t.duration_ms, "number");
      assert.equal(await currentOf(baseOf(host)), "1.0.0");
      assert.equal(await readFile(join(baseOf(host), "current", "app.txt"), "utf8"), "1.0.0");
      assert.deepEqual(await activations(host), ["1.0.0 test shop"]);
      // The upload area is left empty.
      assert.deepEqual(await readdir(join(baseOf(host), ".incoming")), []);
    }
  });

  it("deploys a second version, recording the previous one", async () => {
    const d = await plugin();
    const r = await d.deploy(request({ artifact: art["2.0.0"]!, targets, params, parallelism: 2 }));
    assert.deepEqual(
      r.targets.map((t) => [t.status, t.details?.previous_version]),
      [
        ["deployed", "1.0.0"],
        ["deployed", "1.0.0"],
      ],
    );
    assert.equal(await readFile(join(baseOf("web-1"), "current", "app.txt"), "utf8"), "2.0.0");
    assert.deepEqual(await readdir(join(baseOf("web-1"), "releases")), ["1.0.0", "2.0.0"]);
  });

  it("re-deploying the current version is unchanged and copies nothing", async () => {
    const d = await plugin();
    const before = await stat(join(baseOf("web-1"), "releases", "2.0.0", "app.txt"));
    const r = await d.deploy(request({ artifact: art["2.0.0"]!, targets, params }));
    assert.deepEqual(
      r.targets.map((t) => [t.status, t.details?.bytes_sent]),
      [
        ["unchanged", "0"],
        ["unchanged", "0"],
      ],
    );
    const afterStat = await stat(join(baseOf("web-1"), "releases", "2.0.0", "app.txt"));
    assert.equal(afterStat.ino, before.ino);
    assert.equal(afterStat.mtimeMs, before.mtimeMs);
    assert.deepEqual(await activations("web-1"), ["1.0.0 test shop", "2.0.0 test shop"]);
  });

  it("tells the current release of each target", async () => {
    const d = await plugin();
    const rel = await d.currentRelease(
      request({
        artifact: art["2.0.0"]!,
        targets: [...targets, { host: "web-3", labels: {} }],
        params,
      }),
    );
    assert.deepEqual(
      rel.map((r) => [r.host, r.version]),
      [
        ["web-1", "2.0.0"],
        ["web-2", "2.0.0"],
        ["web-3", ""],
      ],
    );
  });

  it("keeps the last keep_releases releases", async () => {
    const d = await plugin();
    for (const v of ["3.0.0", "4.0.0", "5.0.0"]) await d.deploy(request({ artifact: art[v]!, targets, params, parallelism: 2 }));
    for (const host of ["web-1", "web-2"]) {
      assert.deepEqual((await readdir(join(baseOf(host), "releases"))).sort(), ["3.0.0", "4.0.0", "5.0.0"]);
    }
  });

  it("never prunes the previous release, even when it is the oldest", async () => {
    const d = await plugin();
    // Roll web-1 back to 3.0.0 (the oldest kept), then deploy 1.0.0 again: 3.0.0 is now previous.
    await d.rollback(rollbackRequest({ artifact: art["5.0.0"]!, targets: [targets[0]!], params }, [{ host: "web-1", version: "3.0.0" }]));
    const again = await makeTarball(join(dir), "6.0.0");
    await d.deploy(
      request({
        artifact: again,
        targets: [targets[0]!],
        params: { ...params, keep_releases: "2" },
      }),
    );
    assert.deepEqual((await readdir(join(baseOf("web-1"), "releases"))).sort(), ["3.0.0", "6.0.0"]);
  });

  it("rolls back to the recorded releases without copying, re-running activate", async () => {
    const d = await plugin();
    const checkpoint = await d.currentRelease(request({ artifact: art["5.0.0"]!, targets, params }));
    assert.deepEqual(
      checkpoint.map((r) => r.version),
      ["6.0.0", "5.0.0"],
    );
    const before = (await activations("web-2")).length;
    await d.deploy(request({ artifact: art["4.0.0"]!, targets, params }));
    const r = await d.rollback(rollbackRequest({ artifact: art["4.0.0"]!, targets, params }, checkpoint));
    assert.deepEqual(
      r.targets.map((t) => [t.host, t.status, t.details?.bytes_sent]),
      [
        ["web-1", "rolled_back", "0"],
        ["web-2", "rolled_back", "0"],
      ],
    );
    assert.equal(await currentOf(baseOf("web-1")), "6.0.0");
    assert.equal(await currentOf(baseOf("web-2")), "5.0.0");
    assert.deepEqual((await activations("web-2")).slice(before), ["4.0.0 test shop", "5.0.0 test shop"]);
  });

  it("fails the target when activate fails, with exit code and stderr; rollback restores", async () => {
    const d = await plugin();
    const checkpoint = await d.currentRelease(request({ artifact: art["5.0.0"]!, targets, params }));
    const failing = {
      ...params,
      activate: 'echo "starting $MANENT_VERSION"; echo "port 8080 already in use" >&2; exit 3',
    };
    const err = await d.deploy(request({ artifact: art["3.0.0"]!, targets, params: failing })).then(
      () => assert.fail("deploy should fail"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResultError);
    assert.equal(err.code, Code.Aborted);
    assert.ok(err.permanent);
    assert.match(err.message, /web-1: activate of release 3\.0\.0 failed with exit code 3; stderr: port 8080 already in use/);
    // Parallelism 1: the first failure stops the deploy; web-2 is never started.
    assert.deepEqual(
      err.result.targets.map((t) => t.status),
      ["failed", "skipped"],
    );
    assert.equal(await currentOf(baseOf("web-1")), "3.0.0");
    const r = await d.rollback(rollbackRequest({ artifact: art["3.0.0"]!, targets, params }, checkpoint));
    assert.deepEqual(
      r.targets.map((t) => t.status),
      ["rolled_back", "unchanged"],
    );
    assert.equal(await currentOf(baseOf("web-1")), "6.0.0");
  });

  it("fails activate that outruns activate_timeout", async () => {
    const d = await plugin();
    const slow = { ...params, activate: "sleep 30", activate_timeout: "1s" };
    await assert.rejects(
      d.deploy(
        request({
          artifact: art["2.0.0"]!,
          targets: [targets[1]!],
          params: slow,
        }),
      ),
      /timed out after 1000 ms/,
    );
  });

  it("copies a non-archive artifact as is under its file name", async () => {
    const d = await plugin();
    const bin = await makeFile(dir, "shop-linux-amd64", "7.0.0", 4096);
    await d.deploy(request({ artifact: bin, targets: [targets[0]!], params }));
    const copied = await readFile(join(baseOf("web-1"), "current", "shop-linux-amd64"));
    assert.deepEqual(copied, await readFile(bin.path));
  });

  it("rolls back to nothing by removing current", async () => {
    const d = await plugin();
    const r = await d.rollback(
      rollbackRequest({ artifact: art["1.0.0"]!, targets: [targets[1]!], params }, [{ host: "web-2", version: "" }]),
    );
    assert.equal(r.targets[0]!.status, "rolled_back");
    assert.match(r.targets[0]!.details?.note ?? "", /current removed/);
    assert.equal(await currentOf(baseOf("web-2")), "");
  });

  it("refuses a release that is gone", async () => {
    const d = await plugin();
    await assert.rejects(
      d.rollback(rollbackRequest({ artifact: art["1.0.0"]!, targets: [targets[0]!], params }, [{ host: "web-1", version: "1.0.0" }])),
      (e: ManentError) => e.code === Code.FailedPrecondition && /release 1\.0\.0 is no longer/.test(e.message),
    );
  });
});
