import { createHash, createPublicKey, type KeyObject } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Bundle } from "@sigstore/bundle";
import type { TrustMaterial } from "@sigstore/verify";
import { verifyKeylessBundle, type KeylessPolicy } from "./sigstore-keyless.js";
import type { Verified } from "./verification-result.js";

/** A key a policy accepts: its id (the bundle's publicKey.hint) and the PEM file it is read from. */
export interface SigstoreKey {
  id: string;
  file: string;
}

/** True when the bytes look like a JSON document (a Sigstore bundle), not an SSH signature. */
export function looksLikeJson(bytes: Buffer): boolean {
  return bytes.subarray(0, 64).toString("latin1").trimStart().startsWith("{");
}

/** What a policy's `sigstore` accepts, its files resolved. */
export interface SigstoreTrust {
  keys: SigstoreKey[];
  keyless?: KeylessPolicy & { trusted_root: string };
}

/**
 * Verifies a Sigstore bundle over the artifact offline with sigstore-js (@sigstore/verify). A
 * bundle with a certificate is keyless: see verifyKeylessBundle. A bundle with a public key is
 * checked against the policy's public keys only: the bundle's publicKey.hint must name one of them, its message
 * signature must be over exactly these bytes (the digest it carries is checked too). No
 * transparency log, CT log or timestamp authority is consulted: a key-based bundle needs none, and
 * one that carries log entries is refused (no log key is configured to check them against).
 * Throws a plain Error whose message is the reason.
 */
export async function verifySigstoreBundle(artifact: Buffer, sha256: string, bytes: Buffer, trust: SigstoreTrust): Promise<Verified> {
  const keys = trust.keys;
  // Imported here: sigstore-js costs every server start a tenth of a second, and most verify nothing.
  const [{ bundleFromJSON, isBundleWithPublicKey }, { toSignedEntity, Verifier }] = await Promise.all([
    import("@sigstore/bundle"),
    import("@sigstore/verify"),
  ]);
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new Error("the Sigstore bundle is not valid JSON");
  }
  let bundle: Bundle;
  try {
    bundle = bundleFromJSON(json);
  } catch (err) {
    throw new Error(`malformed Sigstore bundle: ${(err as Error).message}`);
  }
  if (bundle.content.$case !== "messageSignature") {
    throw new Error("the bundle holds a DSSE envelope; sign the artifact's bytes (a message signature, as `cosign sign-blob` makes)");
  }
  const digest = bundle.content.messageSignature.messageDigest;
  if (digest && digest.digest.length > 0 && digest.digest.toString("hex") !== sha256) {
    throw new Error("the bundle's message digest is of other bytes than the artifact's");
  }
  if (!isBundleWithPublicKey(bundle)) {
    if (!trust.keyless)
      throw new Error("the bundle is signed with a certificate (keyless); this policy accepts only its sigstore.public_keys");
    return verifyKeylessBundle(artifact, bundle, trust.keyless, trust.keyless.trusted_root);
  }
  if (keys.length === 0) {
    throw new Error("the bundle is signed with a key (publicKey.hint); this policy accepts only keyless certificates (sigstore.keyless)");
  }
  const hint = bundle.verificationMaterial.content.publicKey.hint;
  const key = keys.find((k) => k.id === hint);
  if (!key) {
    throw new Error(
      `the bundle names key ${JSON.stringify(hint.slice(0, 128))}, not one of the policy's sigstore.public_keys (${keys.map((k) => k.id).join(", ")})`,
    );
  }
  const publicKey = await readKey(key.file);
  const material: TrustMaterial = {
    certificateAuthorities: [],
    timestampAuthorities: [],
    tlogs: [],
    ctlogs: [],
    publicKey: (h: string) => {
      if (h !== key.id) throw new Error(`key not found: ${h}`);
      return { publicKey, validFor: () => true };
    },
  };
  try {
    new Verifier(material, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }).verify(toSignedEntity(bundle, artifact));
  } catch (err) {
    const message = (err as Error).message;
    if (/signature verification failed/i.test(message))
      throw new Error(`the signature does not verify with key ${key.id}: it is over other bytes or made by another key`);
    throw new Error(`sigstore: ${message}`);
  }
  return { method: "sigstore", key: `${key.id} ${fingerprint(publicKey)}` };
}

async function readKey(file: string): Promise<KeyObject> {
  let pem: string;
  try {
    pem = await readFile(file, "utf8");
  } catch (err) {
    throw new Error(`cannot read the public key ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return createPublicKey(pem);
  } catch {
    throw new Error(`${file} is not a PEM public key`);
  }
}

/** SHA256:<base64> of the key's SubjectPublicKeyInfo, as ssh-keygen prints an SSH key's. */
function fingerprint(key: KeyObject): string {
  const der = key.export({ type: "spki", format: "der" });
  return `SHA256:${createHash("sha256").update(der).digest("base64").replace(/=+$/, "")}`;
}
