import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };

/** A certificate and its key, in PEM, with the serial number as Node reports it (upper-case hex). */
export interface Issued {
  certPem: string;
  keyPem: string;
  serial: string;
}

/** A throwaway certificate authority made by a test: it issues server and client certificates. */
export class TestCa {
  private constructor(
    readonly certPem: string,
    private readonly cert: x509.X509Certificate,
    private readonly key: webcrypto.CryptoKey,
  ) {}

  static async create(name: string): Promise<TestCa> {
    const keys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `CN=${name}`,
      ...validity(),
      signingAlgorithm: alg,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    return new TestCa(cert.toString("pem"), cert, keys.privateKey);
  }

  /** A server certificate for 127.0.0.1 and localhost. */
  server(): Promise<Issued> {
    return this.issue("CN=manent-server", x509.ExtendedKeyUsage.serverAuth, [
      { type: "ip", value: "127.0.0.1" },
      { type: "dns", value: "localhost" },
    ]);
  }

  /** A client certificate (mutual TLS). */
  client(name: string): Promise<Issued> {
    return this.issue(`CN=${name}`, x509.ExtendedKeyUsage.clientAuth, []);
  }

  private async issue(subject: string, usage: string, names: x509.JsonGeneralName[]): Promise<Issued> {
    const keys = (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
    const serialNumber = serial();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber,
      subject,
      issuer: this.cert.subject,
      ...validity(),
      signingAlgorithm: alg,
      signingKey: this.key,
      publicKey: keys.publicKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([usage]),
        await x509.AuthorityKeyIdentifierExtension.create(this.cert),
        ...(names.length ? [new x509.SubjectAlternativeNameExtension(names)] : []),
      ],
    });
    const pkcs8 = await webcrypto.subtle.exportKey("pkcs8", keys.privateKey);
    return { certPem: cert.toString("pem"), keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY"), serial: serialNumber.toUpperCase() };
  }
}

/** 16 random bytes, positive (a leading bit set would make DER add a zero byte Node then shows). */
function serial(): string {
  return Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
    .toString("hex")
    .replace(/^[089a-f]/, "1");
}

function validity(): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return { notBefore: new Date(now - 60_000), notAfter: new Date(now + 24 * 3_600_000) };
}
