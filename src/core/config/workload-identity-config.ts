import { z } from "zod";
import { caFile } from "./pem-file.js";
import { httpsUrl } from "./oidc-config.js";

/**
 * manent.yml's `auth.workload_identities`: CI jobs (GitHub Actions, GitLab CI, any OpenID
 * provider that issues a job its own ID token) call the API with that token instead of a stored
 * API token. Each entry trusts one issuer's tokens for one audience whose claims match its
 * patterns, and binds one role to a tenant, application and environment scope.
 */

// Names as descriptors allow them (lower-case letters, digits, '.', '_', '-'), plus `*`.
const scopePattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, { message: `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'` });

/** One claim's pattern: the exact value, or `*` for any run of characters (`refs/heads/*`). */
const claimPattern = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[\x20-\x7e]+$/, { message: "a claim pattern is printable ASCII" });

/** Claims an issuer sets itself, checked by the verification: a pattern on them would be confusing, not a constraint. */
const verifiedClaims = ["iss", "aud", "exp", "iat", "nbf", "jti", "azp", "nonce"];

/**
 * The claims that say whose job it is: the repository, project or its owner (GitHub Actions and
 * GitLab CI), or the subject. A public issuer (token.actions.githubusercontent.com, gitlab.com)
 * mints tokens for anyone's repository with any audience the job asks for, so an entry must pin
 * one of these to an owner, or every repository on the issuer would match.
 */
export const ownerClaims = [
  "sub",
  "repository",
  "repository_owner",
  "repository_id",
  "repository_owner_id",
  "job_workflow_ref",
  "project_path",
  "project_id",
  "namespace_path",
  "namespace_id",
  "ci_config_ref_uri",
] as const;

/**
 * True when a pattern fixes the owner: an exact value, or a glob whose text before its first `*`
 * holds a `/` after at least one character that is not a separator (`repo:acme/*`,
 * `acme/shop-*`, `project_path:group/app:*`); `repo:*`, `acme*` or `*` are not.
 */
export function pinsOwner(pattern: string): boolean {
  const star = pattern.indexOf("*");
  if (star < 0) return true;
  return /[^/:]\//.test(pattern.slice(0, star));
}

export const workloadIdentitySchema = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._-]+$/, { message: "must be letters, digits, '.', '_' or '-'" })
      .meta({ description: "The entry's name, in refusals and the server's log", examples: ["github-shop-deploy"] }),
    issuer: httpsUrl("issuer").meta({
      description:
        "The issuer of the CI job's ID tokens (their iss claim); its /.well-known/openid-configuration gives the signing keys (JWKS), read when first needed",
      examples: ["https://token.actions.githubusercontent.com", "https://gitlab.com"],
    }),
    audience: z
      .string()
      .min(1)
      .max(256)
      .meta({
        description:
          "The audience the token must be issued for (its aud claim): what the job asks its issuer for (GitHub: core.getIDToken(audience); GitLab: id_tokens.NAME.aud)",
        examples: ["https://manent.example.com"],
      }),
    claims: z
      .record(
        z
          .string()
          .min(1)
          .max(128)
          .regex(/^[A-Za-z0-9_.:-]+$/, { message: "a claim name is letters, digits, '_', '.', ':' or '-'" }),
        z.union([claimPattern, z.array(claimPattern).min(1).max(50)]),
      )
      .meta({
        description:
          "Claim name to pattern (or a list of patterns, any of which matches): the exact value, or '*' for any run of characters. Every claim named must match; one of sub, repository, repository_owner, project_path, namespace_path (or their ids) must pin the owner",
        examples: [{ repository: "acme/shop", ref: "refs/heads/main", environment: "prod" }],
      }),
    role: z.enum(["viewer", "deployer", "approver"]).meta({
      description:
        "The role a matching job gets: viewer, deployer or approver (admin is never a CI job's: administration stays with people and API tokens). Only approver lets a job approve",
      examples: ["deployer"],
    }),
    tenant: scopePattern("tenant").meta({ description: "The tenants where the role applies", examples: ["team-a"] }),
    application: scopePattern("application")
      .default("*")
      .meta({ description: "The applications where the role applies", examples: ["shop"] }),
    environment: scopePattern("environment")
      .default("*")
      .meta({ description: "The environments where the role applies", examples: ["prod", "dev*"] }),
    ca_file: caFile(
      "CA certificates (PEM) trusted for the issuer's https address beside the system's roots (a self-hosted GitLab signed by a private CA); relative to the working directory",
      "/etc/manent/gitlab-ca.crt",
    ),
  })
  .superRefine((w, ctx) => {
    for (const claim of Object.keys(w.claims)) {
      if (verifiedClaims.includes(claim)) {
        ctx.addIssue({
          code: "custom",
          path: ["claims", claim],
          message: `${claim} is checked by the token's verification (issuer, audience, lifetime), not by a pattern: remove it`,
        });
      }
    }
    const pinned = ownerClaims.some((c) => {
      const p = w.claims[c];
      return p !== undefined && (Array.isArray(p) ? p : [p]).every(pinsOwner);
    });
    if (!pinned) {
      ctx.addIssue({
        code: "custom",
        path: ["claims"],
        message:
          `unsafe: no claim pins whose job it is, so any repository or project on ${w.issuer} could match (an issuer mints tokens for anyone's job, with any audience it asks for). ` +
          `Give one of ${ownerClaims.join(", ")} an exact value or a pattern whose owner is fixed before any '*' (e.g. repository: acme/shop, sub: "repo:acme/*")`,
      });
    }
  })
  .describe("A CI job's own OpenID Connect ID token, trusted for one role where its claims match");

export type WorkloadIdentityConfig = z.output<typeof workloadIdentitySchema>;

/**
 * The refusals across entries, reported at start naming the field: a duplicate name, one issuer
 * with two CA files, and two entries that would match exactly the same tokens (same issuer,
 * audience and claims): a token matching several entries gets all their roles (the documented
 * rule), so identical matches with different scopes are an editing mistake, not a policy.
 */
export function checkWorkloadIdentities(entries: readonly WorkloadIdentityConfig[], ctx: z.RefinementCtx, at: (string | number)[]): void {
  const seen = new Map<string, number>();
  const caFiles = new Map<string, { i: number; ca: string | undefined }>();
  const matches = new Map<string, number>();
  for (const [i, w] of entries.entries()) {
    const first = seen.get(w.name);
    if (first !== undefined) {
      ctx.addIssue({ code: "custom", path: [...at, i, "name"], message: `${w.name} is already the name of entry ${first}` });
    } else seen.set(w.name, i);
    const issuer = w.issuer.replace(/\/+$/, "");
    const ca = caFiles.get(issuer);
    if (ca && ca.ca !== w.ca_file) {
      ctx.addIssue({
        code: "custom",
        path: [...at, i, "ca_file"],
        message: `entry ${ca.i} names the same issuer with ${ca.ca === undefined ? "no ca_file" : `ca_file ${ca.ca}`}: give every entry of one issuer the same ca_file`,
      });
    } else if (!ca) caFiles.set(issuer, { i, ca: w.ca_file });
    const key = JSON.stringify([issuer, w.audience, canonicalClaims(w.claims)]);
    const same = matches.get(key);
    if (same !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: [...at, i, "claims"],
        message: `entry ${same} (${entries[same]!.name}) matches exactly the same tokens (same issuer, audience and claims): merge them, or make their claims differ`,
      });
    } else matches.set(key, i);
  }
}

function canonicalClaims(claims: WorkloadIdentityConfig["claims"]): [string, string[]][] {
  return Object.entries(claims)
    .map(([k, v]): [string, string[]] => [k, (Array.isArray(v) ? [...v] : [v]).sort()])
    .sort(([a], [b]) => a.localeCompare(b));
}
