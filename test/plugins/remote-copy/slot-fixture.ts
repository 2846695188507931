import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before } from "node:test";
import { promisify } from "node:util";
import type { Request, RolloutPlan, Target } from "../../../src/plugin.js";
import { sha256File } from "../../../src/plugins/remote-copy/artifact-file.js";
import { RemoteCopyDeployer } from "../../../src/plugins/remote-copy/index.js";
import { killSlotProcesses, startHaproxy, twoSlotHosts, type Haproxy, type HaproxyOptions } from "../../support/haproxy.js";
import { request, type TestArtifact } from "./helpers.js";

const run = promisify(execFile);
const exampleDir = join(import.meta.dirname, "../../../examples/canary-quickstart");

/** The example app (examples/canary-quickstart) built as 1.0.0 and 1.1.0, once per test file. */
export async function buildArtifacts(): Promise<{ dist: string; art: Record<string, TestArtifact> }> {
  const dist = await mkdtemp(join(tmpdir(), "manent-slots-dist-"));
  await run("bash", [join(exampleDir, "build.sh"), dist]);
  const art: Record<string, TestArtifact> = {};
  for (const v of ["1.0.0", "1.1.0"]) {
    const path = join(dist, `hello-${v}.tar.gz`);
    art[v] = { path, version: v, sha256: await sha256File(path) };
  }
  return { dist, art };
}

/**
 * Two local targets with two slots each (blue live with 1.0.0) behind a real HAProxy, and the
 * plugin's params for them, as slots-haproxy.test.ts sets them up.
 */
export class SlotSite {
  private constructor(
    readonly dir: string,
    readonly haproxy: Haproxy,
    readonly targets: Target[],
    readonly params: Record<string, string>,
    readonly deployer: RemoteCopyDeployer,
    private readonly art: Record<string, TestArtifact>,
  ) {}

  static async start(art: Record<string, TestArtifact>, opts: HaproxyOptions, rollout: RolloutPlan): Promise<SlotSite> {
    const dir = await mkdtemp(join(tmpdir(), "manent-slots-"));
    const { targets, servers } = await twoSlotHosts(["web-1", "web-2"]);
    const haproxy = await startHaproxy(dir, servers, opts);
    const params: Record<string, string> = {
      transport: "local",
      base: join(dir, "hosts", "{host}"),
      keep_releases: "3",
      activate: "./activate.sh",
      deactivate: "./deactivate.sh",
      activate_timeout: "30s",
      haproxy_socket: haproxy.socket,
      haproxy_backend: haproxy.backend,
      haproxy_tester_backend: haproxy.testerBackend,
      drain_timeout: "20s",
      ...(haproxy.routeAcl ? { haproxy_route_acl: haproxy.routeAcl } : {}),
    };
    const site = new SlotSite(dir, haproxy, targets, params, new RemoteCopyDeployer({}), art);
    await site.deployer.deploy(site.req("1.0.0"));
    site.rollout = rollout;
    return site;
  }

  /** The plan the engine sends with every call of the rollout (unset for the first plain deploy). */
  rollout: RolloutPlan | undefined;

  req(version: string, traffic?: Record<string, string>): Request {
    const r = request({ artifact: this.art[version]!, targets: this.targets, params: this.params });
    return { ...r, ...(traffic ? { traffic } : {}), ...(this.rollout ? { rollout: this.rollout } : {}) };
  }

  liveSlot(host: string): Promise<string> {
    return readFile(join(this.dir, "hosts", host, ".live-slot"), "utf8").then((s) => s.trim());
  }

  async running(host: string): Promise<string[]> {
    return (await readdir(join(this.dir, "hosts", host, "run")).catch(() => [] as string[])).filter((f) => f.endsWith(".pid")).sort();
  }

  /** Stops HAProxy and whatever app process the test left running (by the slots' pid files). */
  async stop(): Promise<void> {
    await this.haproxy.stop();
    await killSlotProcesses(this.targets.map((t) => join(this.dir, "hosts", t.host)));
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * The hooks every SlotSite test file had in its own copy: the example app built once before its
 * tests (and removed after), and each test's site stopped after that test. Call it in a `describe`.
 */
export function slotSites(): { start(opts: HaproxyOptions, rollout: RolloutPlan): Promise<SlotSite> } {
  let dist: string | undefined;
  let art: Record<string, TestArtifact> = {};
  let site: SlotSite | undefined;
  before(async () => ({ dist, art } = await buildArtifacts()));
  after(() => (dist ? rm(dist, { recursive: true, force: true }) : undefined));
  afterEach(() => site?.stop());
  return { start: async (opts, rollout) => (site = await SlotSite.start(art, opts, rollout)) };
}
