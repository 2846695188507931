import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

export interface DeployUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * The non-root user the SSH tests log in as, created when missing. Its password field is `*`
 * (no password, not locked): sshd without PAM refuses accounts whose password starts with `!`.
 */
export function ensureDeployUser(name = "manent-deploy"): DeployUser {
  let entry = findUser(name);
  if (!entry) {
    try {
      execFileSync("useradd", ["--create-home", "--shell", "/bin/sh", "--password", "*", name], { stdio: "pipe" });
    } catch (err) {
      // Another test process may have created it in the meantime.
      if (!findUser(name)) throw err;
    }
    entry = findUser(name);
  }
  if (!entry) throw new Error(`user ${name} could not be created`);
  return entry;
}

function findUser(name: string): DeployUser | undefined {
  for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
    const f = line.split(":");
    if (f[0] === name) return { name, uid: Number(f[2]), gid: Number(f[3]) };
  }
  return undefined;
}
