import { access, readFile } from "node:fs/promises";
import { constants } from "node:fs";
import { z } from "zod";
import { Code, ManentError } from "../errors.js";

/** A reference to a secret value: `file:/absolute/path` or `env:NAME`. The value is never stored. */
export type SecretRef = { kind: "file"; path: string } | { kind: "env"; name: string };

const refPattern = /^(file:\/.+|env:[A-Za-z_][A-Za-z0-9_]*)$/;

export const secretRefSchema = z
  .string()
  .regex(refPattern, { message: 'must be "file:/absolute/path" or "env:NAME"' })
  .transform((ref): SecretRef => (ref.startsWith("file:") ? { kind: "file", path: ref.slice(5) } : { kind: "env", name: ref.slice(4) }));

export function formatSecretRef(ref: SecretRef): string {
  return ref.kind === "file" ? `file:${ref.path}` : `env:${ref.name}`;
}

/**
 * Checks that a secret can be read, without reading it: the file exists and is readable, or the
 * variable is set. Throws `invalid_argument` naming the secret and the reference.
 */
export async function checkSecretRef(name: string, ref: SecretRef, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (ref.kind === "env") {
    if (env[ref.name] === undefined) {
      throw new ManentError(Code.InvalidArgument, `secret "${name}": environment variable ${ref.name} is not set`, {
        details: { secret: name },
      });
    }
    return;
  }
  try {
    await access(ref.path, constants.R_OK);
  } catch {
    throw new ManentError(Code.InvalidArgument, `secret "${name}": file ${ref.path} does not exist or is not readable`, {
      details: { secret: name },
    });
  }
}

/** Reads a secret's value. Trailing newlines of files are dropped (as `$(cat file)` would). */
export async function readSecretRef(name: string, ref: SecretRef, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  await checkSecretRef(name, ref, env);
  if (ref.kind === "env") return env[ref.name]!;
  return (await readFile(ref.path, "utf8")).replace(/\r?\n$/, "");
}

/**
 * A secret sent as an HTTP bearer token (analysis checks, webhooks): read at each use, so a rotated
 * file is used at once. Refused as `invalid_argument` naming `field`, never the value, when it
 * cannot be read or is not printable ASCII without spaces (fetch would refuse such a header with
 * the value in its message).
 */
export async function readBearerToken(field: string, ref: SecretRef): Promise<string> {
  const token = await readSecretRef(field, ref).catch((err: unknown) => {
    throw new ManentError(Code.InvalidArgument, ManentError.from(err).message);
  });
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new ManentError(Code.InvalidArgument, `${field}: the token must be printable ASCII without spaces`);
  return token;
}
