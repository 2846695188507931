import type { AuthConfig } from "../../core/config/index.js";
import type { Grant } from "../../core/identity/index.js";

/** What a signed-in person is known by: the OpenID Connect subject, e-mail and groups claim. */
export interface UserClaims {
  subject: string;
  email?: string | undefined;
  /** The provider vouches for `email`: an e-mail grant needs it. */
  emailVerified: boolean;
  groups: readonly string[];
}

/**
 * A person's grants from manent.yml's `auth.grants`: every entry naming one of their groups, their
 * verified e-mail (compared without case, as mail systems do) or their subject. None: they may sign
 * in and see nothing.
 */
export function grantsForUser(user: UserClaims, auth: Pick<AuthConfig, "grants">): Grant[] {
  const email = user.emailVerified ? user.email?.toLowerCase() : undefined;
  const groups = new Set(user.groups);
  return auth.grants
    .filter(
      (g) =>
        g.groups.some((group) => groups.has(group)) ||
        g.users.some((u) => u === user.subject || (email !== undefined && u.toLowerCase() === email)),
    )
    .map((g) => ({ role: g.role, scope: { tenant: g.tenant, application: g.application, environment: g.environment } }));
}

/** The `auth.grants` entries that name this address by e-mail: what a verified `email` would be granted by address. */
export function emailGrantsFor(email: string | undefined, auth: Pick<AuthConfig, "grants">): number {
  if (email === undefined) return 0;
  const address = email.toLowerCase();
  return auth.grants.filter((g) => g.users.some((u) => u.toLowerCase() === address)).length;
}
