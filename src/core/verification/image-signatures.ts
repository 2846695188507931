import { createHash, createPublicKey, verify, type KeyObject } from "node:crypto";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { VerificationPolicy } from "../config/index.js";
import { readSecretRef } from "../config/secret-ref.js";
import type { ContainerImage } from "../contract/index.js";
import { Code, ManentError } from "../errors.js";
import type { ArtifactVerification } from "./verification-result.js";

/** An image reference pinned by digest, split as a registry reads it. */
export interface PinnedImage {
  /** As image references name it: `docker.io` for Docker Hub, `host:port` for others. */
  host: string;
  repository: string;
  /** `sha256:<hex>`. */
  digest: string;
}

/** How to reach one registry of a policy: its files resolved, its password read. */
export interface RegistryAccess {
  host: string;
  /** PEM certificates to trust beside the system's roots. */
  caFile?: string;
  credentials?: { username: string; password: string };
}

/** One simple-signing layer of cosign's signature manifest: the payload and its base64 signature. */
export interface CosignSignature {
  payload: Buffer;
  signature: string;
}

/**
 * Registries as the core reads them (src/net/oci-registry.ts): cosign's signatures of an image,
 * the layers of the manifest at tag `sha256-<hex>.sig` in the image's repository. Resolves to []
 * when the registry has no such tag. A registry that cannot be reached is an `unavailable`
 * ManentError (a retry may fix it); a hostile or malformed answer is a plain Error whose message is the reason.
 */
export interface ImageRegistry {
  cosignSignatures(image: PinnedImage, registry: RegistryAccess, signal: AbortSignal): Promise<CosignSignature[]>;
}

const cosignType = "cosign container image signature";

/**
 * Splits `[host/]repository[:tag]@sha256:<hex>` as Docker does: the first component is a host when
 * it has a '.' or a ':' or is localhost; otherwise the image is on Docker Hub (`library/` for a
 * single name). Undefined when the reference is not pinned by digest or is malformed.
 */
export function parsePinnedImage(ref: string): PinnedImage | undefined {
  const m = /^([^@\s]+)@(sha256:[a-f0-9]{64})$/.exec(ref);
  if (!m || ref.length > 1024) return undefined;
  let name = m[1]!;
  const slash = name.indexOf("/");
  let host = "docker.io";
  if (slash > 0) {
    const first = name.slice(0, slash);
    if (first.includes(".") || first.includes(":") || first === "localhost") {
      host = first;
      name = name.slice(slash + 1);
    }
  }
  if (!/^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?$/.test(host) || host.includes("..")) return undefined;
  // A tag beside the digest is ignored, as the container runtime ignores it.
  const colon = name.lastIndexOf(":");
  if (colon > name.lastIndexOf("/")) name = name.slice(0, colon);
  if (!/^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/.test(name)) return undefined;
  if (host === "docker.io" && !name.includes("/")) name = `library/${name}`;
  return { host, repository: name, digest: m[2]! };
}

export interface VerifyImagesInput {
  images: ContainerImage[];
  policies: VerificationPolicy[];
  registry: ImageRegistry;
  configFile: string;
  baseDir: string;
  signal: AbortSignal;
}

/**
 * Checks every image against every policy with image_signatures: pinned by digest, on one of the
 * policy's registries, with a cosign signature whose payload names this digest, made by one of the
 * policy's keys. Returns one verification per image and policy; a refusal is permanent
 * (permission_denied), names the image, its file and field, the policy and the reason.
 */
export async function verifyImages(o: VerifyImagesInput): Promise<ArtifactVerification[]> {
  const out: ArtifactVerification[] = [];
  for (const policy of o.policies) {
    const spec = policy.image_signatures;
    if (!spec) continue;
    const keys = await Promise.all(spec.public_keys.map(async (k) => ({ id: k.id, key: await readKey(resolve(o.baseDir, k.file)) })));
    const verified = new Map<string, ArtifactVerification>();
    for (const use of o.images) {
      const refuse = (reason: string) =>
        new ManentError(
          Code.PermissionDenied,
          `image ${JSON.stringify(clip(use.image))} (${use.file}: ${use.field}) is refused by verification policy ${policy.name} (${o.configFile}): ${reason}`,
          { details: { image: clip(use.image), file: use.file, field: use.field, policy: policy.name, reason } },
        );
      const image = parsePinnedImage(use.image);
      if (!image) throw refuse("it is not referenced by digest (registry/repository@sha256:<digest>), so its signature cannot be checked");
      const seen = verified.get(use.image);
      if (seen) continue;
      const entry = spec.registries.find((r) => r.host === image.host);
      if (!entry) {
        throw refuse(
          `registry ${image.host} is not one of the policy's image_signatures.registries (${spec.registries.map((r) => r.host).join(", ")})`,
        );
      }
      const access: RegistryAccess = {
        host: entry.host,
        ...(entry.ca_file && { caFile: resolve(o.baseDir, entry.ca_file) }),
        ...(entry.username &&
          entry.password && {
            credentials: {
              username: entry.username,
              password: await readSecretRef(
                `verification.policies.${policy.name}.image_signatures.registries.${entry.host}.password`,
                entry.password,
              ),
            },
          }),
      };
      let signatures: CosignSignature[];
      try {
        signatures = await o.registry.cosignSignatures(image, access, o.signal);
      } catch (err) {
        if (err instanceof ManentError) throw err;
        throw refuse((err as Error).message);
      }
      if (signatures.length === 0)
        throw refuse(`it carries no cosign signature (no tag sha256-${image.digest.slice(7)}.sig in ${image.host}/${image.repository})`);
      const found = check(signatures, image.digest, keys);
      if (typeof found === "string") throw refuse(found);
      const v: ArtifactVerification = {
        policy: policy.name,
        digest: image.digest,
        method: "cosign",
        key: `${found.id} ${fingerprint(found.key)}`,
        image: use.image,
      };
      verified.set(use.image, v);
      out.push(v);
    }
  }
  return out;
}

/** The key that signed a payload for this digest, or why none did (the most telling reason). */
function check(
  signatures: CosignSignature[],
  digest: string,
  keys: { id: string; key: KeyObject }[],
): { id: string; key: KeyObject } | string {
  let reason = "no signature verifies with the policy's image_signatures.public_keys";
  for (const s of signatures) {
    let payload: { critical?: { type?: unknown; image?: { "docker-manifest-digest"?: unknown } } };
    try {
      payload = JSON.parse(s.payload.toString("utf8")) as typeof payload;
    } catch {
      reason = "a signature's payload is not JSON (not cosign's simple signing)";
      continue;
    }
    if (payload?.critical?.type !== cosignType) {
      reason = `a signature's payload is not a ${cosignType}`;
      continue;
    }
    if (payload.critical.image?.["docker-manifest-digest"] !== digest) {
      reason = "the signature is for another image digest (its payload's docker-manifest-digest differs)";
      continue;
    }
    const sig = Buffer.from(s.signature, "base64");
    const key = keys.find((k) => {
      try {
        return verify("sha256", s.payload, k.key, sig);
      } catch {
        return false;
      }
    });
    if (key) return key;
  }
  return reason;
}

async function readKey(file: string): Promise<KeyObject> {
  let pem: string;
  try {
    pem = await readFile(file, "utf8");
  } catch (err) {
    throw new ManentError(
      Code.FailedPrecondition,
      `cannot read the public key ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  try {
    return createPublicKey(pem);
  } catch {
    throw new ManentError(Code.FailedPrecondition, `${file} is not a PEM public key`);
  }
}

function fingerprint(key: KeyObject): string {
  const der = key.export({ type: "spki", format: "der" });
  return `SHA256:${createHash("sha256").update(der).digest("base64").replace(/=+$/, "")}`;
}

function clip(s: string): string {
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

/**
 * The images every image_signatures policy verified (from the fetch step's record): what the
 * deploy may apply. A deploy whose fetch was recorded before such a policy existed verified none.
 */
export function imagesVerifiedByAll(policies: VerificationPolicy[], verification: ArtifactVerification[]): string[] {
  const perPolicy = policies
    .filter((p) => p.image_signatures)
    .map((p) => new Set(verification.filter((v) => v.policy === p.name && v.method === "cosign" && v.image).map((v) => v.image!)));
  const [first, ...rest] = perPolicy;
  return [...(first ?? [])].filter((image) => rest.every((s) => s.has(image))).sort();
}
