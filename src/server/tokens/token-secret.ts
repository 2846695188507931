import { createHash, randomBytes } from "node:crypto";

/**
 * A managed token's value: a fixed prefix, so secret scanners (GitHub's, gitleaks, trufflehog
 * custom rules) find leaked tokens and the server knows which check a bearer token is for, then
 * 32 random bytes in base64url (256 bits: not guessable, not worth hashing slowly).
 */
export const tokenPrefix = "mnt_";

/** Matches a managed token's value and nothing longer (for scanners and tests): `mnt_` and 43 base64url characters. */
export const tokenPattern = /\bmnt_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/;

export function newTokenSecret(): string {
  return tokenPrefix + randomBytes(32).toString("base64url");
}

/** What the database keeps of a value: its sha256. */
export function secretSha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

export function isManagedTokenValue(value: string): boolean {
  return value.startsWith(tokenPrefix);
}
