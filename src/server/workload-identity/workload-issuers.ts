import * as client from "openid-client";
import type { WorkloadIdentityConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { isLoopbackHttpUrl } from "../../core/net/loopback.js";
import { IdTokenVerifier } from "../oidc/id-token-verifier.js";
import { providerTransport } from "../oidc/provider-transport.js";

/** One issuer trusted by auth.workload_identities, its entries, and its verifier once discovered. */
interface Issuer {
  issuer: string;
  entries: WorkloadIdentityConfig[];
  send: typeof fetch | undefined;
  verifier?: Promise<IdTokenVerifier>;
}

/**
 * The issuers of auth.workload_identities, each discovered when a token of it first arrives
 * (/.well-known/openid-configuration: its jwks_uri and algorithms; again after a failure, so an
 * issuer down at start-up is not fatal), each with its own JWKS cache, refetched when a token names
 * a key it does not hold (a rotation). The CA files are read at start: a missing one stops the
 * server naming the field.
 */
export class WorkloadIssuers {
  private constructor(private readonly issuers: Map<string, Issuer>) {}

  static async create(entries: readonly WorkloadIdentityConfig[], file: string, baseDir: string): Promise<WorkloadIssuers> {
    const issuers = new Map<string, Issuer>();
    for (const [i, entry] of entries.entries()) {
      const key = entry.issuer.replace(/\/+$/, "");
      let issuer = issuers.get(key);
      if (!issuer) {
        // Every entry of one issuer names the same ca_file (checked with the schema), so the first one's is the issuer's.
        const send =
          entry.ca_file === undefined
            ? undefined
            : await providerTransport(entry.ca_file, file, baseDir, `auth.workload_identities.${i}.ca_file`);
        issuer = { issuer: entry.issuer, entries: [], send };
        issuers.set(key, issuer);
      }
      issuer.entries.push(entry);
    }
    return new WorkloadIssuers(issuers);
  }

  /** The issuer a token's (unverified) `iss` names, if auth.workload_identities trusts it. */
  find(iss: unknown): { entries: readonly WorkloadIdentityConfig[]; verifier: () => Promise<IdTokenVerifier> } | undefined {
    if (typeof iss !== "string") return undefined;
    const issuer = this.issuers.get(iss.replace(/\/+$/, ""));
    if (!issuer) return undefined;
    return {
      entries: issuer.entries,
      verifier: () => {
        issuer.verifier ??= discover(issuer).catch((err: unknown) => {
          issuer.verifier = undefined;
          throw err;
        });
        return issuer.verifier;
      },
    };
  }
}

async function discover(issuer: Issuer): Promise<IdTokenVerifier> {
  let meta: client.ServerMetadata;
  try {
    // openid-client checks the document's issuer is the one asked for; the client id is not used (nothing is requested as a client).
    const configuration = await client.discovery(new URL(issuer.issuer), "manent", undefined, client.None(), {
      timeout: 10,
      ...(isLoopbackHttpUrl(issuer.issuer) && { execute: [client.allowInsecureRequests] }),
      ...(issuer.send && { [client.customFetch]: issuer.send }),
    });
    meta = configuration.serverMetadata();
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : "";
    throw new ManentError(
      Code.Unavailable,
      `cannot read the CI issuer's discovery document at ${issuer.issuer}: ${err instanceof Error ? err.message : String(err)}${cause}`,
    );
  }
  if (!meta.jwks_uri) throw new ManentError(Code.Unavailable, `the CI issuer ${issuer.issuer} publishes no jwks_uri`);
  return new IdTokenVerifier({
    issuer: meta.issuer,
    jwksUri: new URL(meta.jwks_uri),
    audiences: [...new Set(issuer.entries.map((e) => e.audience))],
    providerAlgorithms: meta.id_token_signing_alg_values_supported,
    groupsClaim: "groups",
    ...(issuer.send && { fetch: issuer.send }),
  });
}
