import { createHash, timingSafeEqual } from "node:crypto";
import { readSecretRef, type LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { Principal } from "../../core/identity/index.js";
import { bearerToken, type CredentialCheck } from "./credential-check.js";

/**
 * manent.yml's `auth.tokens`, kept only as sha256 digests in memory. Each token is one principal
 * (`token:<name>`) with one grant: its role over its tenant, application and environment patterns,
 * and the groups manent.yml gives it (for approvals naming `approvers.from_groups`; no role).
 */
export async function staticTokenCheck(config: LoadedConfig): Promise<CredentialCheck> {
  const tokens: { digest: Buffer; principal: Principal }[] = [];
  for (const [i, t] of config.auth.tokens.entries()) {
    let digest: Buffer;
    if (t.sha256) digest = Buffer.from(t.sha256, "hex");
    else {
      const value = await readSecretRef(t.name, t.token!).catch((err: unknown) => {
        throw new ManentError(Code.InvalidArgument, `${config.file}: auth.tokens.${i}.token: ${ManentError.from(err).message}`, {
          details: { file: config.file, field: `auth.tokens.${i}.token` },
        });
      });
      digest = sha256(value);
    }
    tokens.push({
      digest,
      principal: {
        kind: "token",
        id: `token:${t.name}`,
        name: t.name,
        groups: t.groups,
        grants: [{ role: t.role, scope: { tenant: t.tenant, application: t.application, environment: t.environment } }],
      },
    });
  }
  return {
    name: "manent.yml tokens",
    check(request) {
      const token = bearerToken(request.authorization);
      if (token === undefined) return Promise.resolve(undefined);
      const digest = sha256(token);
      // Every digest is compared (no early exit), so the time taken does not tell which one matched.
      let match: Principal | undefined;
      for (const t of tokens) if (timingSafeEqual(t.digest, digest)) match ??= t.principal;
      return Promise.resolve(match);
    },
  };
}

export function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}
