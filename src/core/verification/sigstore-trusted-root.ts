import { open } from "node:fs/promises";
import type { TrustMaterial } from "@sigstore/verify";
import { z } from "zod";

/** Sigstore's public-good trusted_root.json is about 7 KiB; a file far past that is not one. */
const maxBytes = 1024 * 1024;

const b64 = z
  .string()
  .min(1)
  .max(65_536)
  .regex(/^[A-Za-z0-9+/_-]+=*$/, { message: "must be base64" });
const validFor = z.strictObject({ start: z.string().optional(), end: z.string().optional() }).optional();
const logSchema = z.looseObject({
  baseUrl: z.string().max(2048).optional(),
  hashAlgorithm: z.string().optional(),
  publicKey: z.looseObject({ rawBytes: b64, keyDetails: z.string().optional(), validFor }),
  logId: z.looseObject({ keyId: b64 }),
});
const authoritySchema = z.looseObject({
  certChain: z.looseObject({
    certificates: z
      .array(z.looseObject({ rawBytes: b64 }))
      .min(1)
      .max(10),
  }),
  validFor,
});

/**
 * The parts of a TrustedRoot sigstore-js reads, checked before its own (lenient) protobuf parser
 * sees them: that parser leaves a missing key undefined, which sigstore-js would meet as a TypeError.
 */
const trustedRootSchema = z.looseObject({
  mediaType: z.string().startsWith("application/vnd.dev.sigstore.trustedroot", { message: "is not a Sigstore TrustedRoot media type" }),
  tlogs: z.array(logSchema).max(20).default([]),
  certificateAuthorities: z.array(authoritySchema).max(20).default([]),
  ctlogs: z.array(logSchema).max(20).default([]),
  timestampAuthorities: z.array(authoritySchema).max(20).default([]),
});

/**
 * Reads a trusted_root.json (Sigstore's TrustedRoot JSON: certificate authorities, transparency
 * and CT logs, timestamp authorities) into sigstore-js's trust material. Throws a plain Error
 * naming the file, the field and the reason.
 */
export async function loadTrustedRoot(file: string): Promise<TrustMaterial> {
  let text: string;
  try {
    text = await readBounded(file);
  } catch (err) {
    throw new Error(`cannot read the trusted root ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`the trusted root ${file} is not valid JSON`);
  }
  const checked = trustedRootSchema.safeParse(json);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    throw new Error(`the trusted root ${file} is not a Sigstore TrustedRoot: ${issue.path.join(".") || "(top)"}: ${issue.message}`);
  }
  // Imported here: sigstore-js costs every server start, and most servers verify nothing.
  const [{ TrustedRoot }, { toTrustMaterial }] = await Promise.all([import("@sigstore/protobuf-specs"), import("@sigstore/verify")]);
  try {
    return toTrustMaterial(TrustedRoot.fromJSON(checked.data));
  } catch (err) {
    throw new Error(`the trusted root ${file} cannot be used: ${(err as Error).message}`);
  }
}

async function readBounded(file: string): Promise<string> {
  const handle = await open(file, "r");
  try {
    const buf = Buffer.alloc(maxBytes + 1);
    let got = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, got, buf.length - got, null);
      if (bytesRead === 0) break;
      got += bytesRead;
      if (got > maxBytes) throw new Error(`larger than ${maxBytes} bytes`);
    }
    return buf.subarray(0, got).toString("utf8");
  } finally {
    await handle.close();
  }
}
