import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export interface ServerCerts {
  /** The cluster CA, as the plugin receives it through `ca_secret`. */
  caPem: string;
  certPem: string;
  keyPem: string;
}

const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };

function serial(): string {
  return Buffer.from(webcrypto.getRandomValues(new Uint8Array(16))).toString("hex").replace(/^[89a-f]/, "1");
}

/** A throwaway cluster CA and a serving certificate for 127.0.0.1 / localhost, like kubeadm's. */
export async function generateServerCerts(): Promise<ServerCerts> {
  const now = Date.now();
  const caKeys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    // A unique name: several clusters' CAs in one bundle must not shadow each other.
    name: `CN=kubernetes-test-ca-${serial().slice(0, 8)}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 24 * 3_600_000),
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
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 24 * 3_600_000),
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
  return { caPem: ca.toString("pem"), certPem: cert.toString("pem"), keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") };
}
