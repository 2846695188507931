import "reflect-metadata";
import { generateKeyPairSync, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** What a control plane needs to serve TLS and sign service-account tokens. */
export interface ControlPlanePki {
  /** The cluster CA, as the token controller copies it into every token Secret (`ca.crt`). */
  caPem: string;
  /** The API server's serving certificate (127.0.0.1, localhost) and its key. */
  servingCertPem: string;
  servingKeyPem: string;
  /** The key pair service-account tokens are signed and verified with. */
  serviceAccountKeyPem: string;
  serviceAccountPubPem: string;
}

const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };

function serial(): string {
  return Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
    .toString("hex")
    .replace(/^[89a-f]/, "1");
}

/** A throwaway CA, a serving certificate signed by it, and a service-account key pair, like kubeadm's. */
export async function generatePki(): Promise<ControlPlanePki> {
  const now = Date.now();
  const validity = { notBefore: new Date(now - 60_000), notAfter: new Date(now + 24 * 3_600_000) };
  const caKeys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    // A unique name: several clusters' CAs in one bundle must not shadow each other.
    name: `CN=kubernetes-test-ca-${serial().slice(0, 8)}`,
    ...validity,
    signingAlgorithm: alg,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const keys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: "CN=kube-apiserver",
    issuer: ca.subject,
    ...validity,
    signingAlgorithm: alg,
    signingKey: caKeys.privateKey,
    publicKey: keys.publicKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      await x509.AuthorityKeyIdentifierExtension.create(ca),
      new x509.SubjectAlternativeNameExtension([
        { type: "ip", value: "127.0.0.1" },
        { type: "dns", value: "localhost" },
      ]),
    ],
  });
  const pkcs8 = await webcrypto.subtle.exportKey("pkcs8", keys.privateKey);
  const sa = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    caPem: ca.toString("pem"),
    servingCertPem: cert.toString("pem"),
    servingKeyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY"),
    serviceAccountKeyPem: sa.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    serviceAccountPubPem: sa.publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}
