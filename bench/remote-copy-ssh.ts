/**
 * remote-copy over SSH against scp: a 50 MB artifact to 4 hosts (real sshd on loopback).
 * Run: node --import tsx bench/remote-copy-ssh.ts  (root, openssh-server installed).
 * Prints MB/s of the whole fan-out (4 × 50 MB / wall time), sequential and 4 at a time.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { remoteCopyFactory } from "../src/plugins/remote-copy/index.js";
import { makeFile, RecordingLogger, request } from "../test/plugins/remote-copy/helpers.js";
import { sshAccess, sshTargets } from "../test/plugins/remote-copy/ssh-fixture.js";
import { startSshHosts } from "../test/support/sshd/index.js";
import { watchMachine } from "./support/machine-share.js";

const run = promisify(execFile);
const MB = 1024 * 1024;
const size = 50 * MB;
const hostCount = 4;

const hosts = await startSshHosts(hostCount);
const machine = watchMachine();
try {
  const artifact = await makeFile(hosts.dir, "app.bin", "1", size);
  const keyPath = join(hosts.dir, "user_key");
  const knownHostsPath = join(hosts.dir, "known_hosts");
  await writeFile(knownHostsPath, hosts.knownHosts);
  const targets = sshTargets(hosts);
  const d = await remoteCopyFactory({}, new RecordingLogger());
  const rate = (ms: number): string => `${((size * hostCount) / MB / (ms / 1000)).toFixed(1)} MB/s`;
  let round = 0;

  const plugin = async (parallelism: number): Promise<number> => {
    const base = join(await hosts.ownedDir(`bench-${round++}`), "{host}");
    const { params, secrets } = sshAccess(hosts, base);
    const started = performance.now();
    await d.deploy(
      request({
        artifact: { ...artifact, version: `v${round}` },
        targets,
        params,
        secrets,
        parallelism,
      }),
    );
    return performance.now() - started;
  };
  const scp = async (parallel: boolean): Promise<number> => {
    const dir = await hosts.ownedDir(`scp-${round++}`);
    const one = (i: number) =>
      run("scp", [
        "-q",
        "-i",
        keyPath,
        "-o",
        `UserKnownHostsFile=${knownHostsPath}`,
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-P",
        String(targets[i]!.port),
        artifact.path,
        `${hosts.user.name}@${targets[i]!.host}:${dir}/app-${i}.bin`,
      ]);
    const started = performance.now();
    if (parallel) await Promise.all(targets.map((_, i) => one(i)));
    else for (let i = 0; i < targets.length; i++) await one(i);
    return performance.now() - started;
  };

  // One warm-up of each, then the best of three (loopback numbers are noisy on a shared box).
  await plugin(hostCount);
  await scp(true);
  const best = async (f: () => Promise<number>): Promise<number> => Math.min(await f(), await f(), await f());
  const rows: [string, number][] = [
    ["remote-copy, 1 host at a time", await best(() => plugin(1))],
    ["remote-copy, 4 hosts at once", await best(() => plugin(hostCount))],
    ["scp, 1 host at a time", await best(() => scp(false))],
    ["scp, 4 hosts at once", await best(() => scp(true))],
  ];
  console.log(`50 MB artifact to ${hostCount} hosts (real sshd on loopback), best of 3:`);
  for (const [name, ms] of rows) console.log(`  ${name.padEnd(32)} ${(ms / 1000).toFixed(2).padStart(6)} s  ${rate(ms)}`);
  console.log("remote-copy includes per host: connect, SFTP upload, sha256sum on the host, install, switch current.");
} finally {
  await hosts.close();
}

machine.report();
