import { createRemoteJWKSet, customFetch, decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from "jose";
import { Code, ManentError } from "../../core/errors.js";

/**
 * The signature algorithms an ID token may use: asymmetric ones only. `none` and the HMAC family are
 * never accepted, so an unsigned token, or one "signed" with the provider's public key as an HMAC
 * secret, is refused whatever its header says.
 */
export const asymmetricAlgorithms = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

/** What manent keeps of a verified ID token. */
export interface IdentityClaims {
  subject: string;
  email?: string;
  /**
   * The provider vouches for `email` (`email_verified: true`). Anyone may type any address at a
   * provider that lets people sign up, so only a verified address counts for an e-mail grant.
   */
  emailVerified: boolean;
  groups: string[];
  /** When the token expires (seconds since the epoch). */
  expiresAt: number;
  /**
   * The provider left the groups claim out of the token because there are too many (group
   * overage: Entra ID past 200 groups points `_claim_names` to another source, or says `hasgroups`):
   * `groups` is then empty, not the person's groups. See refuseOmittedGroups.
   */
  groupsOmitted?: true;
}

export interface VerifierOptions {
  issuer: string;
  jwksUri: URL;
  /** The client ids whose ID tokens `verify` accepts (the web UI's and the CLI's). */
  audiences: string[];
  /** What the provider says it signs with (discovery); intersected with the asymmetric ones. */
  providerAlgorithms?: string[] | undefined;
  groupsClaim: string;
  /** Seconds of clock difference tolerated on exp/iat/nbf. */
  clockTolerance?: number;
  /** How the JWKS is fetched (the provider's CA trusted, see provider-transport.ts); default Node's fetch. */
  fetch?: typeof fetch;
}

/**
 * Verifies ID tokens with jose: signature against the provider's JWKS, issuer, audience, expiry,
 * and the nonce when one is expected. The JWKS is fetched when first needed and again whenever a
 * token names a key it does not hold (the provider rotated its keys), as go-oidc does: concurrent
 * refetches share one request, and a token is only looked up after its issuer and audience match.
 */
export class IdTokenVerifier {
  private readonly jwks;
  private readonly algorithms: string[];

  constructor(private readonly opts: VerifierOptions) {
    this.jwks = createRemoteJWKSet(opts.jwksUri, {
      cooldownDuration: 0,
      cacheMaxAge: 10 * 60_000,
      timeoutDuration: 5000,
      ...(opts.fetch && { [customFetch]: opts.fetch }),
    });
    const offered = opts.providerAlgorithms?.filter((a) => asymmetricAlgorithms.includes(a)) ?? [];
    this.algorithms = offered.length > 0 ? offered : ["RS256"];
  }

  /** The token's identity; throws `unauthenticated` saying why it is refused (never echoing the token). */
  async verify(token: string, expect: { nonce?: string; audience?: string } = {}): Promise<IdentityClaims> {
    const refuse = (why: string) => new ManentError(Code.Unauthenticated, `ID token refused: ${why}`);
    const audiences = expect.audience ? [expect.audience] : this.opts.audiences;
    const payload = await this.verifiedClaims(token, audiences);
    if (expect.nonce !== undefined && payload.nonce !== expect.nonce) throw refuse("nonce does not match the sign-in");
    const email = typeof payload.email === "string" && payload.email.length <= 320 ? payload.email : undefined;
    return {
      subject: payload.sub!,
      ...(email !== undefined && { email }),
      // The boolean true only (OIDC Core 5.1): a string "true" or an absent claim is not the provider's word.
      emailVerified: email !== undefined && payload.email_verified === true,
      groups: groupsOf(payload[this.opts.groupsClaim]),
      expiresAt: payload.exp!,
      ...(groupsOmitted(payload, this.opts.groupsClaim) && { groupsOmitted: true as const }),
    };
  }

  /**
   * Every claim of a token whose signature, issuer, audience (one of `audiences`), lifetime and
   * algorithm verify (a CI job's token, whose claims the workload policies match); throws
   * `unauthenticated` saying why not, `unavailable` when the signing keys cannot be read.
   */
  async verifiedClaims(token: string, audiences: readonly string[]): Promise<JWTPayload> {
    const refuse = (why: string) => new ManentError(Code.Unauthenticated, `ID token refused: ${why}`);
    let unverified: JWTPayload;
    try {
      const header = decodeProtectedHeader(token);
      if (typeof header.alg !== "string" || !this.algorithms.includes(header.alg)) {
        throw refuse(`signature algorithm ${JSON.stringify(header.alg ?? null)} is not accepted (allowed: ${this.algorithms.join(", ")})`);
      }
      unverified = decodeJwt(token);
    } catch (err) {
      if (err instanceof ManentError) throw err;
      throw refuse("not a well-formed JWT");
    }
    // Cheap checks first, so a stranger's token never makes us fetch the JWKS.
    if (unverified.iss !== this.opts.issuer) throw refuse(`issued by ${JSON.stringify(unverified.iss ?? null)}, not ${this.opts.issuer}`);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.jwks, {
        issuer: this.opts.issuer,
        audience: [...audiences],
        algorithms: this.algorithms,
        requiredClaims: ["sub", "exp", "iat"],
        clockTolerance: this.opts.clockTolerance ?? 30,
      }));
    } catch (err) {
      if (err instanceof errors.JWKSTimeout || !(err instanceof errors.JOSEError)) {
        throw new ManentError(
          Code.Unavailable,
          `cannot read the OpenID provider's signing keys (${this.opts.jwksUri.href}): ${String(err)}`,
        );
      }
      throw refuse(reason(err));
    }
    // With several audiences, the party it was issued to must be one of ours (OIDC Core 3.1.3.7).
    const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (aud.length > 1 && (typeof payload.azp !== "string" || !audiences.includes(payload.azp))) {
      throw refuse("issued to another party (azp)");
    }
    return payload;
  }
}

/** The groups claim is absent and the token says it exists elsewhere (OIDC Core 5.6.2 distributed claims, or Entra ID's `hasgroups`). */
function groupsOmitted(payload: JWTPayload, claim: string): boolean {
  if (payload[claim] !== undefined) return false;
  const names = payload._claim_names;
  return payload.hasgroups === true || (typeof names === "object" && names !== null && Object.hasOwn(names, claim));
}

/** A groups claim: a list of names (a single name is a list of one); anything else is no group. */
function groupsOf(claim: unknown): string[] {
  const list = typeof claim === "string" ? [claim] : Array.isArray(claim) ? claim : [];
  return list.filter((g): g is string => typeof g === "string" && g.length > 0 && g.length <= 256).slice(0, 1000);
}

function reason(err: unknown): string {
  if (err instanceof errors.JWTExpired) return "expired";
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "aud") return "issued for another audience";
    if (err.claim === "iss") return "issued by another issuer";
    return `claim ${err.claim} ${err.reason === "missing" ? "missing" : "invalid"}`;
  }
  if (err instanceof errors.JWKSNoMatchingKey) return "signed with a key the provider does not publish";
  if (err instanceof errors.JWSSignatureVerificationFailed) return "signature does not verify";
  if (err instanceof errors.JOSEAlgNotAllowed) return "signature algorithm not accepted";
  if (err instanceof errors.JOSEError) return `cannot be verified (${err.code})`;
  return "cannot be verified";
}
