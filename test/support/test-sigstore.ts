import "reflect-metadata";
import { createHash, createPrivateKey, generateKeyPairSync, sign, webcrypto, type KeyObject } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { json, X509Certificate } from "@sigstore/core";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
const oidIssuerV1 = "1.3.6.1.4.1.57264.1.1";
const oidIssuerV2 = "1.3.6.1.4.1.57264.1.8";
const oidSct = "1.3.6.1.4.1.11129.2.4.2";
const codeSigning = "1.3.6.1.5.5.7.3.3";

/** What a keyless signature claims, and when: the certificate's validity and the log's time. */
export interface KeylessSigning {
  /** The certificate's subject alternative name: an e-mail (rfc822Name) or a URI. */
  subject: string;
  /** The OIDC issuer, in Fulcio's extension. */
  issuer: string;
  /** Fulcio's newer extension (.1.8, a DER UTF8String) or the older (.1.1, raw bytes). */
  issuerOid?: "v1" | "v2";
  notBefore: Date;
  notAfter: Date;
  /** When the transparency log says it integrated the entry. */
  integratedTime: Date;
  /** Embed an SCT signed by the CT log (default true). */
  sct?: boolean;
}

interface LogKey {
  key: KeyObject;
  spki: Buffer;
  id: Buffer;
}

/**
 * A Sigstore deployment made by a test, as sigstore's conformance tests make their own: a Fulcio-like
 * certificate authority (its own root), a Rekor-like transparency log key and a CT log key, and the
 * trusted_root.json naming them. It issues short-lived code-signing certificates carrying a subject
 * alternative name and an OIDC issuer, with an embedded SCT, and writes bundles whose log entry
 * carries a signed entry timestamp (inclusion promise) and an inclusion proof with a signed checkpoint.
 */
export class TestSigstore {
  private logIndex = 0;

  private constructor(
    private readonly caCert: x509.X509Certificate,
    private readonly caKey: webcrypto.CryptoKey,
    private readonly rekor: LogKey,
    private readonly ctlog: LogKey,
    private readonly rekorHost: string,
  ) {}

  static async create(name: string): Promise<TestSigstore> {
    const keys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
    const now = Date.now();
    const caCert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `O=${name}, CN=${name} root`,
      notBefore: new Date(now - 365 * 86_400_000),
      notAfter: new Date(now + 365 * 86_400_000),
      signingAlgorithm: alg,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 1, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    return new TestSigstore(caCert, keys.privateKey, logKey(), logKey(), `rekor.${name}.test`);
  }

  /** trusted_root.json (Sigstore's TrustedRoot JSON) naming this CA, log and CT log. */
  trustedRoot(): Record<string, unknown> {
    const start = new Date(Date.now() - 365 * 86_400_000).toISOString();
    const log = (l: LogKey, baseUrl: string) => ({
      baseUrl,
      hashAlgorithm: "SHA2_256",
      publicKey: { rawBytes: l.spki.toString("base64"), keyDetails: "PKIX_ECDSA_P256_SHA_256", validFor: { start } },
      logId: { keyId: l.id.toString("base64") },
    });
    return {
      mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
      tlogs: [log(this.rekor, `https://${this.rekorHost}`)],
      certificateAuthorities: [
        {
          subject: { organization: "test", commonName: "test root" },
          uri: "https://fulcio.test",
          certChain: { certificates: [{ rawBytes: Buffer.from(this.caCert.rawData).toString("base64") }] },
          validFor: { start },
        },
      ],
      ctlogs: [log(this.ctlog, "https://ctfe.test")],
      timestampAuthorities: [],
    };
  }

  /** A keyless bundle (v0.3) over data: a fresh key, a certificate for it, the signature and its log entry. */
  async sign(data: Buffer, o: KeylessSigning): Promise<string> {
    const keys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
    const signingKey = createPrivateKey({
      key: Buffer.from(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey)),
      format: "der",
      type: "pkcs8",
    });
    const cert = await this.certificate(keys.publicKey, o);
    const signature = sign("sha256", data, signingKey);
    const digest = createHash("sha256").update(data).digest();
    const body = Buffer.from(
      json.canonicalize({
        apiVersion: "0.0.1",
        kind: "hashedrekord",
        spec: {
          data: { hash: { algorithm: "sha256", value: digest.toString("hex") } },
          signature: {
            content: signature.toString("base64"),
            publicKey: { content: Buffer.from(x509.PemConverter.encode(cert, "CERTIFICATE")).toString("base64") },
          },
        },
      }),
    );
    return JSON.stringify({
      mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
      verificationMaterial: {
        certificate: { rawBytes: Buffer.from(cert).toString("base64") },
        tlogEntries: [this.logEntry(body, o.integratedTime)],
        timestampVerificationData: { rfc3161Timestamps: [] },
      },
      messageSignature: {
        messageDigest: { algorithm: "SHA2_256", digest: digest.toString("base64") },
        signature: signature.toString("base64"),
      },
    });
  }

  /** A Rekor-style entry: a signed entry timestamp, and an inclusion proof in a one-leaf tree with a signed checkpoint. */
  private logEntry(body: Buffer, integratedTime: Date): Record<string, unknown> {
    const logIndex = this.logIndex++;
    const time = Math.floor(integratedTime.getTime() / 1000);
    const set = sign(
      "sha256",
      Buffer.from(
        json.canonicalize({ body: body.toString("base64"), integratedTime: time, logIndex, logID: this.rekor.id.toString("hex") }),
      ),
      this.rekor.key,
    );
    // RFC 6962: a tree of one leaf has the leaf's hash as its root, and an empty proof.
    const root = createHash("sha256")
      .update(Buffer.from([0]))
      .update(body)
      .digest();
    const note = `${this.rekorHost} - test\n1\n${root.toString("base64")}\n`;
    const noteSig = Buffer.concat([this.rekor.id.subarray(0, 4), sign("sha256", Buffer.from(note), this.rekor.key)]);
    return {
      logIndex: String(logIndex),
      logId: { keyId: this.rekor.id.toString("base64") },
      kindVersion: { kind: "hashedrekord", version: "0.0.1" },
      integratedTime: String(time),
      inclusionPromise: { signedEntryTimestamp: set.toString("base64") },
      inclusionProof: {
        logIndex: "0",
        rootHash: root.toString("base64"),
        treeSize: "1",
        hashes: [],
        checkpoint: { envelope: `${note}\n\u2014 ${this.rekorHost} ${noteSig.toString("base64")}\n` },
      },
      canonicalizedBody: body.toString("base64"),
    };
  }

  /**
   * A Fulcio-style certificate. The SCT is over the precertificate: the certificate's TBS without
   * the SCT extension (RFC 6962 3.2), so the certificate is made once without it, then again, the
   * same in every field, with it appended.
   */
  private async certificate(publicKey: webcrypto.CryptoKey, o: KeylessSigning): Promise<ArrayBuffer> {
    const issuerExt =
      (o.issuerOid ?? "v2") === "v2"
        ? new x509.Extension(oidIssuerV2, false, derUtf8(o.issuer))
        : new x509.Extension(oidIssuerV1, false, Buffer.from(o.issuer, "ascii"));
    const base = {
      serialNumber: serial(),
      subject: "",
      issuer: this.caCert.subject,
      notBefore: o.notBefore,
      notAfter: o.notAfter,
      signingAlgorithm: alg,
      signingKey: this.caKey,
      publicKey,
    };
    const extensions = [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([codeSigning]),
      await x509.AuthorityKeyIdentifierExtension.create(this.caCert),
      new x509.SubjectAlternativeNameExtension([{ type: o.subject.includes("://") ? "url" : "email", value: o.subject }], true),
      issuerExt,
    ];
    const pre = await x509.X509CertificateGenerator.create({ ...base, extensions });
    if (o.sct === false) return pre.rawData;
    const tbs = X509Certificate.parse(Buffer.from(pre.rawData)).tbsCertificate.toDER();
    const timestamp = Buffer.alloc(8);
    timestamp.writeBigUInt64BE(BigInt(o.notBefore.getTime()));
    const issuerKeyHash = createHash("sha256").update(Buffer.from(this.caCert.publicKey.rawData)).digest();
    const signed = Buffer.concat([Buffer.from([0, 0]), timestamp, u16(1), issuerKeyHash, u24(tbs.length), tbs, u16(0)]);
    const sctSignature = sign("sha256", signed, this.ctlog.key);
    const sct = Buffer.concat([
      Buffer.from([0]),
      this.ctlog.id,
      timestamp,
      u16(0),
      Buffer.from([4, 3]),
      u16(sctSignature.length),
      sctSignature,
    ]);
    const list = Buffer.concat([u16(sct.length + 2), u16(sct.length), sct]);
    const sctExt = new x509.Extension(oidSct, false, Buffer.concat([Buffer.from([0x04]), derLength(list.length), list]));
    return (await x509.X509CertificateGenerator.create({ ...base, extensions: [...extensions, sctExt] })).rawData;
  }
}

function logKey(): LogKey {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const spki = publicKey.export({ type: "spki", format: "der" });
  return { key: privateKey, spki, id: createHash("sha256").update(spki).digest() };
}

function serial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f;
  return Buffer.from(bytes).toString("hex");
}

function derUtf8(s: string): Buffer {
  const bytes = Buffer.from(s, "utf8");
  return Buffer.concat([Buffer.from([0x0c]), derLength(bytes.length), bytes]);
}

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  if (n < 0x100) return Buffer.from([0x81, n]);
  return Buffer.from([0x82, n >> 8, n & 0xff]);
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

function u24(n: number): Buffer {
  return Buffer.from([(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
}
