import type { Logger } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { authorize, authorizeDelegation, can, roleActions, type Grant, type Principal } from "../../core/identity/index.js";
import type { ManagedToken, PgTokenStore } from "../../storage/pg-token-store.js";
import { bearerToken, type CredentialCheck } from "../identity/index.js";
import { isManagedTokenValue, newTokenSecret, secretSha256 } from "./token-secret.js";

/** A token's last use is written at most this often per token and server (a busy CI token is not one write per request). */
export const lastUseIntervalMs = 5000;

/** How many tokens a list reads before it filters by what the caller may see. */
const listCap = 10_000;

export interface NewTokenRequest {
  name: string;
  grant: Grant;
  expiresInMs: number;
}

/**
 * Managed API tokens: created and revoked through the API by callers with `token_admin`, stored
 * hashed in Postgres (pg-token-store.ts). Every request with such a token reads its row: a token
 * revoked through any server is refused by every server from the next request on, with no cache
 * to invalidate (a lookup by a unique index costs about as much as the request's own parsing:
 * bench/token-auth.ts).
 */
export class ManagedTokens {
  private readonly lastTouch = new Map<string, number>();

  constructor(
    private readonly store: PgTokenStore,
    /** manent.yml's token names: a managed token may not share one (two things that look alike are refused, never merged). */
    private readonly staticNames: ReadonlySet<string>,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** The credential check for the authenticator chain: bearer tokens with the managed prefix. */
  readonly check: CredentialCheck = {
    name: "managed tokens",
    check: async (request) => {
      const value = bearerToken(request.authorization);
      if (value === undefined || !isManagedTokenValue(value)) return undefined;
      const found = await this.store.findBySecret(secretSha256(value));
      if (!found) return undefined;
      const { token, expired, actsFor } = found;
      if (token.revoked_at !== null)
        throw new ManentError(
          Code.Unauthenticated,
          `API token ${token.name} was revoked at ${token.revoked_at} by ${token.revoked_by?.name}`,
        );
      if (expired) throw new ManentError(Code.Unauthenticated, `API token ${token.name} expired at ${token.expires_at}`);
      if (this.staticNames.has(token.name))
        throw new ManentError(
          Code.Unauthenticated,
          `API token ${token.name}: manent.yml has a token of the same name, so this managed one is refused; revoke it and create it under another name`,
        );
      await this.touched(token.id);
      return principalOf(token, actsFor);
    },
  };

  /** Creates a token within the caller's own rights; the value is in the answer and nowhere else. */
  async create(caller: Principal, req: NewTokenRequest): Promise<ManagedToken & { token: string }> {
    authorizeDelegation(caller, req.grant);
    if (this.staticNames.has(req.name))
      throw new ManentError(Code.AlreadyExists, `name: manent.yml has a token named ${req.name}; choose another name`, {
        details: { field: "name" },
      });
    const value = newTokenSecret();
    const created = await this.store.create({
      name: req.name,
      grant: req.grant,
      secretSha256: secretSha256(value),
      createdBy: caller,
      expiresInMs: req.expiresInMs,
    });
    if (!created)
      throw new ManentError(Code.AlreadyExists, `name: a token named ${req.name} exists (or existed: names of revoked tokens are kept)`, {
        details: { field: "name" },
      });
    return { ...created, token: value };
  }

  /** The tokens the caller may administer, newest first. */
  async list(caller: Principal, filter: { tenant?: string; limit: number }): Promise<ManagedToken[]> {
    if (!caller.grants.some((g) => roleActions[g.role].includes("token_admin")))
      throw new ManentError(
        Code.PermissionDenied,
        `${caller.name} may not list API tokens: needs the token_admin permission (role admin)`,
        {
          details: { action: "token_admin" },
        },
      );
    const all = await this.store.list(listCap);
    return all
      .filter((t) => can(caller, "token_admin", t.grant.scope) && (filter.tenant === undefined || t.grant.scope.tenant === filter.tenant))
      .slice(0, filter.limit);
  }

  /**
   * Revokes a token. One the caller may not see at all is not found; one it may see but not
   * administer is forbidden, naming the permission.
   */
  async revoke(caller: Principal, id: string): Promise<ManagedToken> {
    const token = await this.store.get(id);
    if (!token || !can(caller, "read", token.grant.scope)) throw new ManentError(Code.NotFound, `no API token ${id}`);
    authorize(caller, "token_admin", token.grant.scope);
    const revoked = await this.store.revoke(id, caller);
    if (!revoked) {
      const now = await this.store.get(id);
      throw new ManentError(
        Code.FailedPrecondition,
        `API token ${token.name} was already revoked at ${now?.revoked_at ?? "?"} by ${now?.revoked_by?.name ?? "?"}`,
      );
    }
    this.lastTouch.delete(id);
    return revoked;
  }

  /** The token's row, for the audit entry of a revoke (its tenant) before acting. */
  get(id: string): Promise<ManagedToken | undefined> {
    return this.store.get(id);
  }

  private async touched(id: string): Promise<void> {
    const at = this.now();
    const last = this.lastTouch.get(id);
    if (last !== undefined && at - last < lastUseIntervalMs) return;
    this.lastTouch.set(id, at);
    // Bounded: entries older than the interval would write anyway, so forgetting them changes nothing.
    if (this.lastTouch.size > 10_000) for (const [k, t] of this.lastTouch) if (at - t >= lastUseIntervalMs) this.lastTouch.delete(k);
    // A use that cannot be recorded does not refuse the request: the token itself was checked.
    await this.store
      .touch(id, lastUseIntervalMs)
      .catch((err: unknown) => this.logger.warn("cannot record an API token's last use", { token_id: id, error: String(err) }));
  }
}

/**
 * A managed token's principal: one grant, its role over its scope, and the identity of whom it acts
 * for (its creator, see PgTokenStore.findBySecret). Separation of duties, the submitter of what it
 * submits and the audit's actor id are that person's: a person who submitted may not approve with a
 * token they made, nor give two approvals with two of them. Its name stays the token's.
 */
export function principalOf(token: ManagedToken, actsFor: Pick<Principal, "id">): Principal {
  return { kind: "token", id: actsFor.id, name: token.name, groups: [], grants: [token.grant] };
}
