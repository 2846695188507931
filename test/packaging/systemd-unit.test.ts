import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFile, cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { loadManentConfig } from "../../src/core/config/index.js";
import { repoRoot } from "../support/server-process.js";

const run = promisify(execFile);
const unitDir = join(repoRoot, "packaging/systemd");

/**
 * systemd-analyze verify, on an alternate root holding the unit, the distribution's own units
 * (sysinit.target…) and the ExecStart binary where the unit says it is installed: it checks every
 * directive and that the command exists and is executable. verify exits 0 on a directive it
 * ignores, so the test wants no output at all.
 */
async function verify(root: string, unitText: string, name = "manent-server.service"): Promise<string> {
  await writeFile(join(root, "etc/systemd/system", name), unitText);
  const r = await run("systemd-analyze", ["verify", `--root=${root}`, join(root, "etc/systemd/system", name)]).catch(
    (err: { stdout: string; stderr: string }) => err,
  );
  return `${r.stdout}${r.stderr}`.trim();
}

describe("the systemd unit (packaging/systemd)", () => {
  let root: string;
  let unit: string;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "manent-systemd-"));
    await mkdir(join(root, "etc/systemd/system"), { recursive: true });
    await mkdir(join(root, "usr/lib/systemd"), { recursive: true });
    await cp("/usr/lib/systemd/system", join(root, "usr/lib/systemd/system"), { recursive: true, verbatimSymlinks: true });
    await mkdir(join(root, "opt/manent/bin"), { recursive: true });
    await copyFile(join(repoRoot, "bin/manent-server.js"), join(root, "opt/manent/bin/manent-server.js"));
    unit = await readFile(join(unitDir, "manent-server.service"), "utf8");
  });
  after(() => rm(root, { recursive: true, force: true }));

  it("passes systemd-analyze verify without a single warning", async () => {
    assert.equal(await verify(root, unit), "");
  });

  it("is told apart from a unit with a bad directive or a missing binary (the check can fail)", async () => {
    assert.match(await verify(root, unit.replace("KillMode=mixed", "KillMode=sometimes"), "bad.service"), /kill mode/i);
    assert.match(
      await verify(root, unit.replace("/opt/manent/bin/manent-server.js", "/opt/manent/bin/missing.js"), "missing.service"),
      /missing\.js is not executable/,
    );
  });

  it("runs as its own user with a state directory, no new privileges, a read-only system and a restart policy", () => {
    const directives = new Map<string, string[]>();
    for (const line of unit.split("\n")) {
      const m = /^([A-Za-z]+)=(.*)$/.exec(line);
      if (m) directives.set(m[1]!, [...(directives.get(m[1]!) ?? []), m[2]!]);
    }
    const one = (k: string): string | undefined => directives.get(k)?.at(-1);
    assert.equal(one("User"), "manent");
    assert.equal(one("StateDirectory"), "manent");
    assert.equal(one("WorkingDirectory"), "/var/lib/manent");
    assert.equal(one("NoNewPrivileges"), "yes");
    assert.equal(one("ProtectSystem"), "strict");
    assert.equal(one("ProtectHome"), "yes");
    assert.equal(one("PrivateTmp"), "yes");
    assert.equal(one("Restart"), "on-failure");
    assert.equal(one("ExecStart"), "/opt/manent/bin/manent-server.js -c /etc/manent/manent.yml serve");
    assert.equal(one("EnvironmentFile"), "-/etc/manent/manent.env");
    assert.ok(Number(one("LimitNOFILE")) >= 65536);
  });

  it("has an exposure level systemd-analyze security rates OK (at most 2.0 of 10)", async () => {
    const file = join(root, "etc/systemd/system/manent-server.service");
    await writeFile(file, unit);
    // --threshold makes the command fail when the unit is more exposed than that.
    const r = await run("systemd-analyze", ["security", "--offline=true", "--threshold=20", "--no-pager", file]);
    assert.match(r.stdout, /Overall exposure level for manent-server\.service: [01]\.\d OK/);
  });

  it("its sysusers.d file creates the manent user, home /var/lib/manent, no login shell", async () => {
    const usersRoot = await mkdtemp(join(tmpdir(), "manent-sysusers-"));
    try {
      await mkdir(join(usersRoot, "etc"), { recursive: true });
      await run("systemd-sysusers", [`--root=${usersRoot}`, join(unitDir, "manent.sysusers")]);
      const passwd = await readFile(join(usersRoot, "etc/passwd"), "utf8");
      assert.match(passwd, /^manent:x:\d+:\d+:manent deployment orchestrator:\/var\/lib\/manent:\/usr\/sbin\/nologin$/m);
      assert.match(await readFile(join(usersRoot, "etc/group"), "utf8"), /^manent:x:\d+:$/m);
    } finally {
      await rm(usersRoot, { recursive: true, force: true });
    }
  });

  it("ships a manent.yml the server accepts, with its state in the unit's state directory", async () => {
    const config = await loadManentConfig(join(unitDir, "manent.yml"));
    assert.equal(config.workdir, "/var/lib/manent");
    assert.equal(config.dbos.database_url, undefined);
  });
});
