/**
 * Who calls the API, once authenticated: a person signed in with OpenID Connect, an API token (from
 * manent.yml or managed in Postgres), or nobody on an open loopback API. Every check of what a
 * caller may do (policy.ts) and every audit entry reads this one shape.
 */
import type { Grant } from "./grants.js";

export type PrincipalKind = "user" | "token" | "workload" | "anonymous";

export interface Principal {
  kind: PrincipalKind;
  /**
   * Whom the caller counts as: `user:<sub>` for a person (the OIDC subject), `token:<name>` for a
   * manent.yml token, `workload:<issuer>#<sub>` for a CI job's own ID token (auth.workload_identities), `anonymous` on an open API; a managed token counts as whom it acts for (its
   * creator, through any tokens that created it), so one person with several tokens is still one.
   * Separation of duties compares these, never display names.
   */
  id: string;
  /** Shown in messages, the audit log and on deploys: a person's e-mail (else the subject), a token's name. */
  name: string;
  email?: string;
  /** A person's groups from the provider's groups claim; empty for a CI job. */
  groups: readonly string[];
  /** What the caller may do where: the roles bound to it (policy.ts decides with them). */
  grants: readonly Grant[];
}
