import { caFetch } from "../../net/ca-fetch.js";

/**
 * How manent-server reaches its OpenID provider when `auth.oidc.ca_file` names a private CA (a
 * company's own Dex or Keycloak): a fetch trusting those certificates beside the system's roots,
 * for discovery, the code exchange and the signing keys alike. Read once at start-up, so a missing
 * or unreadable file stops the server naming the field rather than failing the first sign-in.
 */
export function providerTransport(caFile: string, configFile: string, baseDir: string, field = "auth.oidc.ca_file"): Promise<typeof fetch> {
  return caFetch(caFile, configFile, field, baseDir);
}
