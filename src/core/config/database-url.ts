import { z } from "zod";
import { Code, ManentError } from "../errors.js";
import { readSecretRef, secretRefSchema } from "./secret-ref.js";

const postgresUrl = /^postgres(ql)?:\/\//;
const secretRef = /^(env|file):/;

/**
 * `dbos.database_url`: a Postgres URL written in manent.yml, or a reference to where it is kept
 * (`env:NAME`, `file:/path`), so the password stays out of the file (a Kubernetes Secret, a
 * systemd EnvironmentFile). The reference is read at start-up by {@link resolveDatabaseUrl}.
 */
export const databaseUrlSchema = z.string().superRefine((url, ctx) => {
  if (postgresUrl.test(url)) return;
  if (secretRef.test(url)) {
    const ref = secretRefSchema.safeParse(url);
    if (!ref.success) ctx.addIssue({ code: "custom", message: ref.error.issues[0]!.message });
    return;
  }
  const scheme = /^([a-z0-9+.-]+):/i.exec(url)?.[1] ?? url;
  ctx.addIssue({
    code: "custom",
    message:
      `"${scheme}" is not supported: manent stores deploys with DBOS Transact on Postgres. ` +
      `Write database_url: postgres://user:password@host:5432/dbname for an existing server ` +
      `(or env:NAME / file:/path where it is kept), or remove database_url to use the embedded Postgres under workdir`,
  });
});

/** The URL itself: read from its reference when manent.yml names one, and checked to be a Postgres URL. */
export async function resolveDatabaseUrl(value: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (!secretRef.test(value)) return value;
  const url = (await readSecretRef("dbos.database_url", secretRefSchema.parse(value), env)).trim();
  if (!postgresUrl.test(url)) {
    // The value is a secret: the message names where it came from, never what it holds.
    throw new ManentError(Code.InvalidArgument, `dbos.database_url: ${value} does not hold a postgres:// URL`, {
      details: { field: "dbos.database_url" },
    });
  }
  return url;
}
