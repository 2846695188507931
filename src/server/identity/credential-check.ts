import type { Principal } from "../../core/identity/index.js";

/** What a credential check sees of a request. */
export interface CredentialRequest {
  /** The Authorization header, as sent. */
  authorization: string | undefined;
  /** The request's cookies by name (a session cookie, for one). */
  cookies: Readonly<Record<string, string>>;
}

/**
 * One way of proving who calls: manent.yml's static tokens, managed tokens, an OpenID Connect
 * session. The authenticator (authenticator.ts) asks each in turn; the first that recognises the
 * request's credential answers for it.
 */
export interface CredentialCheck {
  /** For messages: "static tokens", "session"… */
  readonly name: string;
  /**
   * The caller when this check recognises the credential; `undefined` when it is not this check's
   * kind (no such header or cookie, or a bearer token it does not know: another check may). Throws
   * `unauthenticated` when the credential is this check's but refused (an expired session).
   */
  check(request: CredentialRequest): Promise<Principal | undefined>;
}

/** The bearer token of an Authorization header, if there is one. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer\s+(.+)$/i.exec(authorization ?? "")?.[1]?.trim() || undefined;
}
