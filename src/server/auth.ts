import { createHash, timingSafeEqual } from "node:crypto";
import { readSecretRef, type LoadedConfig } from "../core/config/index.js";
import { Code, ManentError } from "../core/errors.js";

/** Who is calling: a token's name and the tenant it may see ("*" for all). */
export interface Caller {
  name: string;
  tenant: string;
}

export interface Authenticator {
  /** Throws `unauthenticated` for a missing or unknown token. */
  authenticate(authorization: string | undefined): Caller;
}

/**
 * Bearer tokens from manent.yml, kept only as sha256 digests in memory. With no tokens
 * configured the API is open, which the server allows only on a loopback address.
 */
export async function createAuthenticator(config: LoadedConfig): Promise<Authenticator> {
  const tokens: { digest: Buffer; caller: Caller }[] = [];
  for (const [i, t] of config.auth.tokens.entries()) {
    let digest: Buffer;
    if (t.sha256) digest = Buffer.from(t.sha256, "hex");
    else {
      const value = await readSecretRef(t.name, t.token!).catch((err: unknown) => {
        throw new ManentError(Code.InvalidArgument, `${config.file}: auth.tokens.${i}.token: ${ManentError.from(err).message}`);
      });
      digest = sha256(value);
    }
    tokens.push({ digest, caller: { name: t.name, tenant: t.tenant } });
  }
  if (tokens.length === 0) {
    const host = config.listen.slice(0, config.listen.lastIndexOf(":"));
    if (!["127.0.0.1", "localhost", "::1", "[::1]"].includes(host)) {
      throw new ManentError(
        Code.InvalidArgument,
        `${config.file}: auth.tokens: no API token is configured, so the API may only listen on a loopback address (listen is ${config.listen})`,
      );
    }
    return { authenticate: () => ({ name: "anonymous", tenant: "*" }) };
  }
  return {
    authenticate(authorization) {
      const token = /^Bearer\s+(.+)$/i.exec(authorization ?? "")?.[1]?.trim();
      if (!token) throw new ManentError(Code.Unauthenticated, "missing bearer token (set MANENT_TOKEN or --token)");
      const digest = sha256(token);
      const match = tokens.find((t) => timingSafeEqual(t.digest, digest));
      if (!match) throw new ManentError(Code.Unauthenticated, "unknown API token");
      return match.caller;
    },
  };
}

function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

/** Throws `permission_denied` unless the caller may see the tenant. */
export function authorize(caller: Caller, tenant: string): void {
  if (caller.tenant !== "*" && caller.tenant !== tenant) {
    throw new ManentError(Code.PermissionDenied, `token ${caller.name} may not act on tenant ${tenant}`);
  }
}
