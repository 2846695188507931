import { spawn } from "node:child_process";
import { createReadStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { Verified } from "./verification-result.js";

const armour = "-----BEGIN SSH SIGNATURE-----";
/** ssh-keygen answers in milliseconds; a hung one must not hold the fetch step for ever. */
const timeoutMs = 60_000;

/** True when the bytes are an armoured OpenSSH signature (`ssh-keygen -Y sign`'s .sig). */
export function isSshSignature(bytes: Buffer): boolean {
  return bytes.subarray(0, 64).toString("latin1").trimStart().startsWith(armour);
}

/**
 * Verifies an OpenSSH signature over the file with OpenSSH's own `ssh-keygen -Y`: first which
 * principals of allowed_signers hold the signing key (find-principals), then the signature by one
 * of them in the namespace (verify), which reads the file on its standard input. Returns the
 * principal and the key's fingerprint; throws a plain Error whose message is the reason.
 */
export async function verifySshSignature(
  file: string,
  signature: Buffer,
  o: { allowedSigners: string; namespace: string },
): Promise<Verified> {
  const dir = await mkdtemp(join(tmpdir(), "manent-sshsig-"));
  try {
    const sig = join(dir, "artifact.sig");
    await writeFile(sig, signature, { mode: 0o600 });
    const found = await run(["-Y", "find-principals", "-s", sig, "-f", o.allowedSigners]);
    if (found.code !== 0) {
      throw new Error(
        /no principal matched/i.test(found.stderr) || found.stderr.trim() === ""
          ? "the signing key is not in allowed_signers"
          : `ssh-keygen: ${lastLine(found.stderr)}`,
      );
    }
    const principals = found.stdout.split("\n").filter((l) => l.trim() !== "");
    let reason = "no principal verified it";
    for (const principal of principals) {
      const out = await run(["-Y", "verify", "-f", o.allowedSigners, "-I", principal, "-n", o.namespace, "-s", sig], file);
      const good = /^Good "[^"]*" signature for (.+) with (\S+) key (SHA256:\S+)\s*$/m.exec(out.stdout + out.stderr);
      if (out.code === 0 && good) return { method: "ssh", identity: good[1]!, key: good[3]!, key_type: good[2]! };
      reason = describe(out.stderr);
    }
    throw new Error(reason);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** ssh-keygen's own words for the common refusals, said plainly. */
function describe(stderr: string): string {
  if (/namespace does not match/i.test(stderr)) return "the signature was made in another namespace";
  if (/incorrect signature/i.test(stderr)) return "the signature is not over these bytes";
  if (/expired|not yet valid/i.test(stderr)) return "the key in allowed_signers is not valid now";
  return `ssh-keygen: ${lastLine(stderr) || "could not verify the signature"}`;
}

function lastLine(s: string): string {
  const lines = s
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  return (lines.at(-1) ?? "").slice(0, 300);
}

function run(args: string[], stdinFile?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("ssh-keygen", args, {
      stdio: [stdinFile ? "pipe" : "ignore", "pipe", "pipe"],
      timeout: timeoutMs,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => (stdout = (stdout + c).slice(-16_384)));
    child.stderr?.setEncoding("utf8").on("data", (c: string) => (stderr = (stderr + c).slice(-16_384)));
    child.on("error", (err) => reject(new Error(`ssh-keygen cannot be run: ${err.message}`)));
    // ssh-keygen may stop reading early (a refusal): a broken pipe is its answer, not ours.
    if (stdinFile && child.stdin) pipeline(createReadStream(stdinFile), child.stdin).catch(() => undefined);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
