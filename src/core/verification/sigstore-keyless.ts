import { createHash } from "node:crypto";
import type { Bundle } from "@sigstore/bundle";
import type { VerificationError } from "@sigstore/verify";
import type { VerificationPolicy } from "../config/index.js";
import { loadTrustedRoot } from "./sigstore-trusted-root.js";
import type { Verified } from "./verification-result.js";

export type KeylessPolicy = NonNullable<NonNullable<VerificationPolicy["sigstore"]>["keyless"]>;
type Identity = KeylessPolicy["identities"][number];

/**
 * Verifies a keyless Sigstore bundle (its verification material a Fulcio-style certificate)
 * offline with sigstore-js against the policy's trusted root: the transparency log entries
 * (inclusion promise or proof, signed by a log of the root), the timestamps they or a timestamp
 * authority give, the certificate chain to a certificate authority of the root at that time (a
 * short-lived certificate has expired long before the deploy: the log's time is what counts), its
 * SCTs, the signature over the artifact's bytes, then the certificate's subject alternative name
 * and OIDC issuer against the policy's identities. Throws a plain Error whose message is the reason.
 */
export async function verifyKeylessBundle(artifact: Buffer, bundle: Bundle, policy: KeylessPolicy, trustedRoot: string): Promise<Verified> {
  // Imported here, as sigstore-bundle.ts does: most servers verify nothing, and sigstore-js costs every start.
  const { toSignedEntity, Verifier, VerificationError: VerificationErrorClass } = await import("@sigstore/verify");
  const trust = await loadTrustedRoot(trustedRoot);
  const verifier = new Verifier(trust, {
    tlogThreshold: policy.tlog_threshold,
    ctlogThreshold: policy.ctlog_threshold,
    timestampThreshold: policy.timestamp_threshold,
  });
  let signer;
  try {
    signer = verifier.verify(toSignedEntity(bundle, artifact));
  } catch (err) {
    throw new Error(err instanceof VerificationErrorClass ? describe(err, policy, trustedRoot) : `sigstore: ${(err as Error).message}`);
  }
  const subject = signer.identity?.subjectAlternativeName;
  const issuer = signer.identity?.extensions?.issuer;
  if (!subject || !issuer) {
    throw new Error(
      `the certificate names ${subject ? "no OIDC issuer (extension 1.3.6.1.4.1.57264.1.8 or .1.1)" : "no subject alternative name"}: it is not a Fulcio-style signing certificate`,
    );
  }
  if (!policy.identities.some((i) => matches(i, subject, issuer))) {
    throw new Error(
      `the certificate is for ${JSON.stringify(clip(subject))} issued by ${JSON.stringify(clip(issuer))}, not one of the policy's sigstore.keyless.identities`,
    );
  }
  return { method: "sigstore", key: `certificate ${fingerprint(bundle)}`, identity: subject, issuer };
}

function matches(i: Identity, subject: string, issuer: string): boolean {
  const subjectOk = i.subject !== undefined ? i.subject === subject : whole(i.subject_regexp!).test(subject);
  const issuerOk = i.issuer !== undefined ? i.issuer === issuer : whole(i.issuer_regexp!).test(issuer);
  return subjectOk && issuerOk;
}

/** The operator's pattern matched against the whole value, as cosign's --certificate-identity-regexp is meant. */
function whole(pattern: string): RegExp {
  return new RegExp(`^(?:${pattern})$`, "u");
}

/** SHA256:<base64> of the leaf certificate's DER. */
function fingerprint(bundle: Bundle): string {
  const content = bundle.verificationMaterial.content;
  const der =
    content.$case === "certificate"
      ? content.certificate.rawBytes
      : content.$case === "x509CertificateChain"
        ? content.x509CertificateChain.certificates[0]!.rawBytes
        : Buffer.alloc(0);
  return `SHA256:${createHash("sha256").update(der).digest("base64").replace(/=+$/, "")}`;
}

/** sigstore-js's verdicts in the policy's words: which check failed, against what. */
function describe(err: VerificationError, policy: KeylessPolicy, root: string): string {
  const cause = (err.cause as Error | undefined)?.message;
  const count = /expected (\d+) [^,]+, got (\d+)/.exec(err.message);
  switch (err.code) {
    case "CERTIFICATE_ERROR":
      if (count) return `the certificate carries ${count[2]} SCTs, and ctlog_threshold is ${policy.ctlog_threshold}`;
      if (/SCT/.test(err.message))
        return `a signed certificate timestamp (SCT) of the certificate does not verify with a CT log of ${root}`;
      if (cause && /expired|not valid/i.test(cause))
        return "the certificate was not valid at the time its transparency log entry or timestamp vouches for (expired, or not yet valid)";
      if (cause && /path/i.test(cause)) return `the certificate was not issued by a certificate authority of ${root}`;
      return `the certificate was not issued by a certificate authority of ${root} valid at the signing time`;
    case "TIMESTAMP_ERROR":
      if (count) return `the bundle carries ${count[2]} verifiable timestamps, and timestamp_threshold is ${policy.timestamp_threshold}`;
      return `a timestamp of the bundle does not verify: ${err.message}`;
    case "TLOG_ERROR":
      if (count) return `the bundle carries ${count[2]} transparency log entries, and tlog_threshold is ${policy.tlog_threshold}`;
      return `transparency log: ${err.message}`;
    case "TLOG_INCLUSION_PROMISE_ERROR":
      return `the transparency log entry's inclusion promise (SET) does not verify with a log of ${root}`;
    case "TLOG_INCLUSION_PROOF_ERROR":
      return `the transparency log entry's inclusion proof does not verify with a log of ${root}: ${err.message}`;
    case "TLOG_MISSING_INCLUSION_ERROR":
      return "the transparency log entry has neither an inclusion promise nor an inclusion proof";
    case "TLOG_BODY_ERROR":
      return `the transparency log entry is for another signature or other bytes (${err.message})`;
    case "SIGNATURE_ERROR":
      return "the signature does not verify with the certificate's key: it is over other bytes";
    default:
      return `sigstore: ${err.message}${cause ? ` (${cause})` : ""}`;
  }
}

function clip(s: string): string {
  return s.length > 256 ? `${s.slice(0, 256)}…` : s;
}
