import { existsSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureDeployUser, type DeployUser } from "./deploy-user.js";
import { generateKey, type KeyPair } from "./keys.js";
import { SshdServer, sshdPath } from "./sshd-server.js";

export { ensureDeployUser, type DeployUser } from "./deploy-user.js";
export { generateKey, type KeyPair } from "./keys.js";
export { SshdServer } from "./sshd-server.js";
export { descendants, establishedTo } from "./processes.js";

/** Several real sshd servers acting as hosts, all letting `user` in with `userKey`. */
export interface SshHosts {
  dir: string;
  user: DeployUser;
  userKey: KeyPair;
  servers: SshdServer[];
  /** known_hosts lines for every server. */
  knownHosts: string;
  /** A directory owned by the deploy user (for base dirs). */
  ownedDir(name: string): Promise<string>;
  close(): Promise<void>;
}

let nextAddress = 2 + (process.pid % 50) * 4;

/**
 * Starts `count` sshd servers on distinct loopback addresses (127.0.0.N), each with its own
 * generated host key, plus a generated user key authorised on all of them. Needs root (sshd
 * must switch to the deploy user) and openssh-server (scripts/ci/remote-copy.sh).
 */
export async function startSshHosts(count: number): Promise<SshHosts> {
  if (!existsSync(sshdPath)) {
    throw new Error(`${sshdPath} not found: install openssh-server (scripts/ci/remote-copy.sh)`);
  }
  const user = ensureDeployUser();
  const dir = await mkdtemp(join(tmpdir(), "manent-sshd-"));
  // The deploy user must reach authorized_keys and the base dirs under it.
  await chmod(dir, 0o755);
  const userKey = await generateKey(join(dir, "user_key"));
  const authorizedKeysPath = join(dir, "authorized_keys");
  await writeFile(authorizedKeysPath, `${userKey.publicKey}\n`, {
    mode: 0o644,
  });
  const servers: SshdServer[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const sdir = join(dir, `sshd-${i}`);
      await mkdir(sdir, { mode: 0o755 });
      const hostKeyPath = join(sdir, "host_ed25519");
      const hostKey = await generateKey(hostKeyPath);
      const server = new SshdServer({
        host: `127.0.${Math.floor(nextAddress / 250)}.${(nextAddress % 250) + 2}`,
        dir: sdir,
        hostKeyPath,
        hostKey,
        authorizedKeysPath,
        user: user.name,
      });
      nextAddress++;
      await server.start();
      servers.push(server);
    }
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    dir,
    user,
    userKey,
    servers,
    knownHosts: servers.map((s) => s.knownHostsLine).join("\n") + "\n",
    ownedDir: async (name) => {
      const p = join(dir, name);
      await mkdir(p, { recursive: true, mode: 0o755 });
      await chown(p, user.uid, user.gid);
      return p;
    },
    close: async () => {
      await Promise.all(servers.map((s) => s.stop()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export type { KeyPair as SshKeyPair };
