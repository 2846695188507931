import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { VerificationConfig, VerificationPolicy } from "../config/index.js";
import type { Artifact } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import { matchesPattern } from "../identity/index.js";
import { looksLikeJson, verifySigstoreBundle } from "./sigstore-bundle.js";
import { isSshSignature, verifySshSignature } from "./ssh-signature.js";
import type { ArtifactVerification, Verified } from "./verification-result.js";

/** The policies of manent.yml's `verification` that apply to a deploy: every one whose patterns match. */
export function policiesFor(
  config: VerificationConfig,
  where: { tenant: string; application: string; environment: string },
): VerificationPolicy[] {
  return config.policies.filter(
    (p) =>
      matchesPattern(p.tenant, where.tenant) &&
      matchesPattern(p.application, where.application) &&
      matchesPattern(p.environment, where.environment),
  );
}

/** True when a policy asks for a signature (not only for image digests). */
export function wantsSignature(p: VerificationPolicy): boolean {
  return p.ssh !== undefined || p.sigstore !== undefined;
}

export interface VerifyInput {
  /** The fetched artifact: its sha256 and the path of its cached copy are set. */
  artifact: Artifact & { sha256: string; path: string };
  /** The signature's bytes, when the artifact names one. */
  signature: Buffer | undefined;
  policies: VerificationPolicy[];
  /** manent.yml, for messages; its key files resolve against baseDir. */
  configFile: string;
  baseDir: string;
}

/**
 * Checks the artifact against every policy that wants a signature: each must find it signed by one
 * of its keys or signers. Returns what each verified; a refusal is permanent (permission_denied)
 * and names the artifact, the policy and the reason.
 */
export async function verifyArtifact(o: VerifyInput): Promise<ArtifactVerification[]> {
  const out: ArtifactVerification[] = [];
  const digest = `sha256:${o.artifact.sha256}`;
  let bytes: Buffer | undefined;
  for (const policy of o.policies.filter(wantsSignature)) {
    const refuse = (reason: string) =>
      new ManentError(
        Code.PermissionDenied,
        `artifact ${o.artifact.name} ${o.artifact.version} (${digest}) is refused by verification policy ${policy.name} (${o.configFile}): ${reason}`,
        { details: { artifact: o.artifact.name, version: o.artifact.version, policy: policy.name, reason, field: "artifact.signature" } },
      );
    if (!o.signature) {
      throw refuse(
        "it carries no signature (name one in artifact.signature, or put <file>.sig or <file>.sigstore.json beside a local artifact)",
      );
    }
    let verified: Verified;
    try {
      if (isSshSignature(o.signature)) {
        if (!policy.ssh) throw new Error("the signature is an SSH signature and this policy accepts only Sigstore bundles");
        verified = await verifySshSignature(o.artifact.path, o.signature, {
          allowedSigners: resolve(o.baseDir, policy.ssh.allowed_signers),
          namespace: policy.ssh.namespace,
        });
      } else if (looksLikeJson(o.signature)) {
        if (!policy.sigstore) throw new Error("the signature is a Sigstore bundle and this policy accepts only SSH signatures");
        // sigstore-js verifies a message signature over the bytes in memory: read once for every policy.
        bytes ??= await readFile(o.artifact.path);
        verified = await verifySigstoreBundle(bytes, o.artifact.sha256, o.signature, {
          keys: (policy.sigstore.public_keys ?? []).map((k) => ({ id: k.id, file: resolve(o.baseDir, k.file) })),
          ...(policy.sigstore.keyless && {
            keyless: { ...policy.sigstore.keyless, trusted_root: resolve(o.baseDir, policy.sigstore.keyless.trusted_root) },
          }),
        });
      } else {
        throw new Error("the signature is neither an SSH signature (-----BEGIN SSH SIGNATURE-----) nor a Sigstore bundle (JSON)");
      }
    } catch (err) {
      throw refuse((err as Error).message);
    }
    out.push({ policy: policy.name, digest, ...verified });
  }
  return out;
}
