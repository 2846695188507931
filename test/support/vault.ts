import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fetchConnecting } from "../../src/net/fetch-connecting.js";
import { freePort, ManagedProcess, toolsBin } from "./kube/processes.js";
import { until } from "./until.js";

/** What `auth/token/lookup` says of a token (times as Vault's clock gives them). */
export interface VaultToken {
  accessor: string;
  path: string;
  policies: string[];
  /** Seconds left. */
  ttl: number;
  creation_ttl: number;
  renewable: boolean;
  issue_time: string;
  expire_time: string | null;
  /** Absent until the token is first renewed. */
  last_renewal?: string;
  meta: Record<string, string> | null;
}

/** The Vault server scripts/ci/vault.sh builds, or a clear error. */
export function vaultBinary(): string {
  const path = `${toolsBin}/vault`;
  if (!existsSync(path)) throw new Error(`${path} is missing: run scripts/ci/vault.sh (scripts/test-setup.sh does) to build Vault`);
  return path;
}

/**
 * A real Vault server in dev mode (in-memory storage, unsealed, KV v2 at secret/) on a free
 * 127.0.0.1 port, with TLS from its own throwaway CA (`-dev-tls`: `caFile`). `api` speaks its HTTP
 * API with the root token, as an operator's `vault` CLI would, to set up policies, auth methods and
 * secrets; manent itself only ever gets the tokens and AppRole credentials made here.
 */
export class DevVault {
  private constructor(
    readonly address: string,
    readonly caFile: string,
    readonly rootToken: string,
    readonly dir: string,
    private readonly process: ManagedProcess,
    private readonly send: typeof fetch,
  ) {}

  static async start(): Promise<DevVault> {
    const binary = vaultBinary();
    const dir = await mkdtemp(join(tmpdir(), "manent-vault-"));
    const port = await freePort();
    const rootToken = `root-${randomBytes(12).toString("hex")}`;
    const proc = ManagedProcess.start(
      "vault",
      binary,
      [
        "server",
        "-dev",
        "-dev-tls",
        `-dev-tls-cert-dir=${dir}`,
        `-dev-root-token-id=${rootToken}`,
        `-dev-listen-address=127.0.0.1:${port}`,
        "-dev-no-store-token",
      ],
      join(dir, "vault.log"),
    );
    const caFile = join(dir, "vault-ca.pem");
    await until(
      async () => (proc.running ? existsSync(caFile) : "exited"),
      (v) => v !== false,
      "vault writes its CA",
      60_000,
    ).then((v) => {
      if (v === "exited") throw new Error(`vault exited at start:\n${proc.tail()}`);
    });
    const send = await fetchConnecting({ ca: await readFile(caFile, "utf8") });
    const vault = new DevVault(`https://127.0.0.1:${port}`, caFile, rootToken, dir, proc, send);
    await until(
      () => vault.health(),
      (s) => s === 200 || !proc.running,
      "vault answers /v1/sys/health",
      60_000,
    );
    if (!proc.running) throw new Error(`vault exited at start:\n${proc.tail()}`);
    return vault;
  }

  private async health(): Promise<number> {
    try {
      const res = await this.send(`${this.address}/v1/sys/health`);
      await res.body?.cancel();
      return res.status;
    } catch {
      return 0;
    }
  }

  /** One request with the root token; throws on a status other than 2xx. */
  async api<T = unknown>(method: string, path: string, body?: unknown, token = this.rootToken): Promise<T> {
    const res = await this.send(`${this.address}/v1/${path}`, {
      method,
      headers: { "x-vault-token": token, ...(body !== undefined && { "content-type": "application/json" }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`vault ${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : {}) as T;
  }

  /** Writes a KV v2 secret under the dev server's secret/ mount. */
  async put(path: string, data: Record<string, string>): Promise<void> {
    await this.api("POST", `secret/data/${path}`, { data });
  }

  /** What Vault itself says of a token (`auth/token/lookup`): its lease, expiry and last renewal. */
  async lookupToken(token: string): Promise<VaultToken> {
    return (await this.api<{ data: VaultToken }>("POST", "auth/token/lookup", { token })).data;
  }

  /** Every token Vault holds that was issued at `path` (e.g. "auth/approle/login"), oldest first. */
  async tokensIssuedAt(path: string): Promise<VaultToken[]> {
    const { keys } = (await this.api<{ data: { keys: string[] } }>("GET", "auth/token/accessors?list=true")).data;
    const tokens = await Promise.all(
      keys.map(async (accessor) => (await this.api<{ data: VaultToken }>("POST", "auth/token/lookup-accessor", { accessor })).data),
    );
    return tokens.filter((t) => t.path === path).sort((a, b) => Date.parse(a.issue_time) - Date.parse(b.issue_time));
  }

  /** Seals Vault: every request but sys/health and sys/unseal is answered 503 until `unseal()`. */
  async seal(): Promise<void> {
    await this.api("PUT", "sys/seal");
  }

  /** Unseals with the key dev mode printed at start (in-memory storage, tokens and secrets kept). */
  async unseal(): Promise<void> {
    const key = /^Unseal Key: (\S+)$/m.exec(this.log())?.[1];
    if (!key) throw new Error(`vault printed no unseal key:\n${this.process.tail()}`);
    const { sealed } = await this.api<{ sealed: boolean }>("PUT", "sys/unseal", { key });
    if (sealed) throw new Error("vault is still sealed after its unseal key");
  }

  /** Vault's own log. */
  log(): string {
    return this.process.tail(1_000_000);
  }

  get running(): boolean {
    return this.process.running;
  }

  async stop(): Promise<void> {
    await this.process.stop();
  }

  async remove(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}
