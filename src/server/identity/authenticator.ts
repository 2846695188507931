import type { LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { isLoopbackHost } from "../../core/net/loopback.js";
import { everywhere, type Principal } from "../../core/identity/index.js";
import type { CredentialCheck, CredentialRequest } from "./credential-check.js";

/** Who calls an open API (no way to sign in is configured): allowed everything, on loopback only. */
export const anonymous: Principal = {
  kind: "anonymous",
  id: "anonymous",
  name: "anonymous",
  groups: [],
  grants: [{ role: "admin", scope: everywhere }],
};

export interface Authenticator {
  /** The caller of a request; throws `unauthenticated` for a missing or refused credential. */
  authenticate(request: CredentialRequest): Promise<Principal>;
}

/**
 * The checks in order: the first that recognises the request's credential decides. With `open`
 * (nothing to sign in with is configured), a request no check claims is the anonymous principal.
 */
export function createAuthenticator(checks: readonly CredentialCheck[], opts: { open: boolean }): Authenticator {
  return {
    async authenticate(request) {
      for (const check of checks) {
        const principal = await check.check(request);
        if (principal) return principal;
      }
      if (opts.open) return anonymous;
      if (request.authorization === undefined)
        throw new ManentError(Code.Unauthenticated, "missing bearer token (set MANENT_TOKEN or --token)");
      throw new ManentError(Code.Unauthenticated, "unknown API token");
    },
  };
}

/** An open API (no credential configured) is refused anywhere but on a loopback address. */
export function assertOpenOnLoopbackOnly(config: LoadedConfig, open: boolean): void {
  if (!open) return;
  if (!isLoopbackHost(config.listen.slice(0, config.listen.lastIndexOf(":")))) {
    throw new ManentError(
      Code.InvalidArgument,
      `${config.file}: auth.tokens: no API token is configured, so the API may only listen on a loopback address (listen is ${config.listen})`,
      { details: { file: config.file, field: "auth.tokens" } },
    );
  }
}
