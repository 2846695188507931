import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { Code, ManentError } from "../../core/errors.js";

/** What `manent login` keeps for one server: the provider's tokens for the CLI's client. */
export interface StoredLogin {
  issuer: string;
  client_id: string;
  id_token: string;
  /** Seconds since the epoch when the ID token expires. */
  expires_at: number;
  refresh_token?: string;
  /** Who signed in, for `manent login`'s and `logout`'s messages. */
  name: string;
}

interface CredentialsFile {
  servers: Record<string, StoredLogin>;
}

/** $XDG_CONFIG_HOME/manent (else ~/.config/manent): owner-only, as the tokens in it sign in as their person. */
export function credentialsDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith("/") ? env.XDG_CONFIG_HOME : join(homedir(), ".config");
  return join(base, "manent");
}

export function credentialsFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(credentialsDir(env), "credentials.json");
}

/** A server's key in the file: its URL without path or trailing slash, so "http://h:8080/" and "http://h:8080" are one. */
export function serverKey(server: string): string {
  try {
    return new URL(server).origin;
  } catch {
    throw new ManentError(Code.InvalidArgument, `--server: ${JSON.stringify(server)} is not a URL (e.g. https://manent.example.com)`);
  }
}

async function readAll(env: NodeJS.ProcessEnv): Promise<CredentialsFile> {
  let text: string;
  try {
    text = await readFile(credentialsFile(env), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { servers: {} };
    throw err;
  }
  try {
    const parsed = JSON.parse(text) as Partial<CredentialsFile>;
    return { servers: typeof parsed.servers === "object" && parsed.servers !== null ? parsed.servers : {} };
  } catch {
    throw new ManentError(Code.InvalidArgument, `${credentialsFile(env)}: not valid JSON (remove it and run manent login again)`);
  }
}

/** Written whole to a new owner-only file and renamed over the old one, so a crash never leaves half a file. */
async function writeAll(file: CredentialsFile, env: NodeJS.ProcessEnv): Promise<void> {
  const dir = credentialsDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const path = credentialsFile(env);
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

export async function loadLogin(server: string, env: NodeJS.ProcessEnv = process.env): Promise<StoredLogin | undefined> {
  return (await readAll(env)).servers[serverKey(server)];
}

/** The stored ID token while it has more than a minute left; undefined when it must be renewed first. */
export function freshIdToken(login: StoredLogin, now: number = Date.now() / 1000): string | undefined {
  return login.expires_at - 60 > now ? login.id_token : undefined;
}

export async function saveLogin(server: string, login: StoredLogin, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const all = await readAll(env);
  all.servers[serverKey(server)] = login;
  await writeAll(all, env);
}

/** Forgets a server's login; the login it was, if any. */
export async function removeLogin(server: string, env: NodeJS.ProcessEnv = process.env): Promise<StoredLogin | undefined> {
  const all = await readAll(env);
  const key = serverKey(server);
  const was = all.servers[key];
  if (!was) return undefined;
  delete all.servers[key];
  await writeAll(all, env);
  return was;
}
