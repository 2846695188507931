import "reflect-metadata";
import { webcrypto } from "node:crypto";
import { X509Certificate as NodeX509 } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** A throwaway certificate and its key, as go-plugin's AutoMTLS makes one per process start. */
export interface Identity {
  certPem: string;
  keyPem: string;
  der: Buffer;
}

/**
 * Generates a self-signed certificate like go-plugin's generateCert (which uses P-521): ECDSA
 * P-256 here, as fast to make and verify and accepted by Go's TLS; CN and DNS name
 * `localhost`, a CA (so the peer can trust it directly as its root) usable for client and server
 * auth. Each side pins exactly the other's certificate.
 */
export async function generateIdentity(): Promise<Identity> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
      .toString("hex")
      .replace(/^[89a-f]/, "1"),
    name: "CN=localhost, O=manent",
    notBefore: new Date(now - 30_000),
    notAfter: new Date(now + 262_980 * 3_600_000),
    signingAlgorithm: alg,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature |
          x509.KeyUsageFlags.keyEncipherment |
          x509.KeyUsageFlags.keyAgreement |
          x509.KeyUsageFlags.keyCertSign,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth, x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([{ type: "dns", value: "localhost" }]),
    ],
  });
  const pkcs8 = await webcrypto.subtle.exportKey("pkcs8", keys.privateKey);
  const keyPem = x509.PemConverter.encode(pkcs8, "PRIVATE KEY");
  return { certPem: cert.toString("pem"), keyPem, der: Buffer.from(cert.rawData) };
}

/** go-plugin sends the server certificate as raw DER in standard base64 without padding. */
export function encodeRawBase64(der: Buffer): string {
  return der.toString("base64").replace(/=+$/, "");
}

export function decodeRawBase64(text: string): Buffer {
  if (!/^[A-Za-z0-9+/]*$/.test(text)) throw new Error("invalid character in base64 (want standard alphabet, no padding)");
  return Buffer.from(text, "base64");
}

/** PEM of a DER certificate, checking that it parses. */
export function derToPem(der: Buffer): string {
  return new NodeX509(der).toString();
}
