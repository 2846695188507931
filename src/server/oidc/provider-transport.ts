import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { rootCertificates } from "node:tls";
import { Code, ManentError } from "../../core/errors.js";
import { fetchConnecting } from "../../net/fetch-connecting.js";

/**
 * How manent-server reaches its OpenID provider when `auth.oidc.ca_file` names a private CA (a
 * company's own Dex or Keycloak): a fetch trusting those certificates beside the system's roots,
 * for discovery, the code exchange and the signing keys alike. Read once at start-up, so a missing
 * or unreadable file stops the server naming the field rather than failing the first sign-in.
 */
export async function providerTransport(
  caFile: string,
  configFile: string,
  baseDir: string,
  field = "auth.oidc.ca_file",
): Promise<typeof fetch> {
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
