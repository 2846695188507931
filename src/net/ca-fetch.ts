import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { rootCertificates } from "node:tls";
import { Code, ManentError } from "../core/errors.js";
import { fetchConnecting } from "./fetch-connecting.js";

/**
 * A fetch trusting the PEM certificates of `caFile` (a private CA: an OpenID provider's, a Vault
 * server's) beside the system's roots. Read once, when the transport is made, so a missing or
 * unreadable file stops the server naming `field` rather than failing the first request.
 */
export async function caFetch(caFile: string, configFile: string, field: string, baseDir: string): Promise<typeof fetch> {
  const path = resolve(baseDir, caFile);
  const refuse = (why: string) =>
    new ManentError(Code.InvalidArgument, `${configFile}: ${field}: ${why}`, { details: { file: configFile, field } });
  let pem: string;
  try {
    pem = await readFile(path, "utf8");
  } catch (err) {
    throw refuse(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw refuse(`${path} holds no PEM certificate`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw refuse(`${path} holds a certificate that does not parse`);
    }
  }
  return fetchConnecting({ ca: [...rootCertificates, ...blocks] });
}
