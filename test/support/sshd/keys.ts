import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface KeyPair {
  /** OpenSSH private key text. */
  privateKey: string;
  /** `type base64 comment` line. */
  publicKey: string;
  /** `SHA256:…` as ssh-keygen prints it. */
  fingerprint: string;
}

/** Generates a key pair with the real ssh-keygen at `path` (and `path.pub`). */
export async function generateKey(path: string, options: { type?: string; passphrase?: string } = {}): Promise<KeyPair> {
  await run("ssh-keygen", ["-q", "-t", options.type ?? "ed25519", "-N", options.passphrase ?? "", "-C", "manent-test", "-f", path]);
  const { stdout } = await run("ssh-keygen", ["-l", "-E", "sha256", "-f", `${path}.pub`]);
  return {
    privateKey: await readFile(path, "utf8"),
    publicKey: (await readFile(`${path}.pub`, "utf8")).trim(),
    fingerprint: stdout.split(/\s+/)[1]!,
  };
}
