import type { Target } from "../../../src/plugin.js";
import type { SshHosts } from "../../support/sshd/index.js";
import { RecordingLogger } from "./helpers.js";
import { remoteCopyFactory } from "../../../src/plugins/remote-copy/index.js";
import type { Deployer, DryRunner, ReleaseInspector, Rollbacker } from "../../../src/plugin.js";

export type FullDeployer = Deployer & DryRunner & ReleaseInspector & Rollbacker;

export async function sshPlugin(): Promise<FullDeployer> {
  return (await remoteCopyFactory({}, new RecordingLogger())) as FullDeployer;
}

/** Targets for the first `n` servers of the fixture. */
export function sshTargets(hosts: SshHosts, n = hosts.servers.length): Target[] {
  return hosts.servers.slice(0, n).map((s) => ({ host: s.host, port: s.port, labels: {} }));
}

/** Params and secrets that let the plugin into the fixture's hosts, known_hosts checked. */
export function sshAccess(hosts: SshHosts, base: string): { params: Record<string, string>; secrets: Record<string, string> } {
  return {
    params: {
      transport: "ssh",
      base,
      user: hosts.user.name,
      known_hosts_secret: "known-hosts",
      connect_timeout: "10s",
    },
    secrets: {
      "ssh-key": hosts.userKey.privateKey,
      "known-hosts": hosts.knownHosts,
    },
  };
}
