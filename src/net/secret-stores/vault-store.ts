import type { Logger } from "../../core/contract/index.js";
import { readSecretRef } from "../../core/config/secret-ref.js";
import type { VaultStoreConfig } from "../../core/config/secret-stores-config.js";
import { formatDeploySecretRef, type VaultSecretRef } from "../../core/config/store-secret-ref.js";
import { Code, ManentError } from "../../core/errors.js";
import { caFetch } from "../ca-fetch.js";
import { transportFailure } from "./transport-failure.js";

/** The token manent holds: what Vault said of it when it was obtained or last renewed. */
interface Session {
  token: string;
  /** What is left of its lease in ms (0: does not expire, as a root token). */
  leaseMs: number;
  renewable: boolean;
  /** The lease a renewal gives (the token's creation TTL; an AppRole role's token_ttl). */
  fullLeaseMs: number;
  /**
   * Whether a renewal gave less than `fullLeaseMs`: Vault capped it at the token's max TTL (and
   * warns "exceeded the effective max_ttl"), so renewing again cannot extend it. Known only from a
   * renewal's answer: a token looked up part-way through its first lease has less than its
   * creation TTL left without being near its max.
   */
  capped: boolean;
}

interface VaultAnswer {
  status: number;
  body: unknown;
}

const field = "secret_stores.vault";

/** What Vault means by a status it answers every path with (sys/health's codes). */
const statusReasons: Record<number, string> = {
  429: "rate limited",
  472: "a disaster-recovery secondary",
  473: "a performance standby",
  501: "not initialized",
  503: "sealed, or a standby that cannot forward",
};

/**
 * Reads KV v2 secrets from a Vault-API server (HashiCorp Vault, OpenBao) over its HTTP API, which
 * is small and stable enough that a client library would add more than it saves: sign-in (a token,
 * or an AppRole login), `GET /v1/<mount>/data/<path>`, and `renew-self` for the token's lease.
 *
 * The token is held in memory only. A renewable token is renewed when two thirds of its lease have
 * passed, so it never expires while the server runs; when Vault gives a shorter lease than asked
 * (the token's max TTL is near), an AppRole token is replaced by a new login before it ends. When a
 * read is refused (403) and Vault no longer knows the token, the token is dropped and the sign-in
 * made again once, so a rotated token file or an expired login heals without a restart; a 403 with
 * a valid token is the policy's answer. Nothing read is kept: each read asks Vault.
 */
export class VaultStore {
  private session: Promise<Session> | undefined;
  private current: Session | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    private readonly config: VaultStoreConfig,
    private readonly send: typeof fetch,
    private readonly logger: Logger,
  ) {}

  static async open(config: VaultStoreConfig, configFile: string, baseDir: string, logger: Logger): Promise<VaultStore> {
    const send = config.ca_file === undefined ? fetch : await caFetch(config.ca_file, configFile, `${field}.ca_file`, baseDir);
    return new VaultStore(config, send, logger);
  }

  async read(ref: VaultSecretRef): Promise<string> {
    const shown = formatDeploySecretRef(ref);
    if (this.closed) throw new ManentError(Code.Unavailable, `${shown}: the Vault store is closed (the server is stopping)`);
    const path = [ref.mount, "data", ...ref.path.split("/")].map(encodeURIComponent).join("/");
    let session = await this.signedIn(shown);
    let answer = await this.request("GET", path, session.token, shown);
    if (answer.status === 403 && !(await this.stillValid(session, shown))) {
      // The token itself is refused (expired, revoked; a rotated token file): one new sign-in, then Vault's answer stands.
      this.drop(session);
      session = await this.signedIn(shown);
      answer = await this.request("GET", path, session.token, shown);
    }
    const { status, body } = answer;
    if (status === 200) {
      const data = (body as { data?: { data?: Record<string, unknown> | null } } | undefined)?.data?.data;
      if (!data || !Object.hasOwn(data, ref.key))
        throw new ManentError(Code.FailedPrecondition, `${shown}: the secret at ${ref.mount}/${ref.path} has no key "${ref.key}"`, {
          details: { ref: shown },
        });
      const value = data[ref.key];
      if (typeof value === "string") return value;
      if (typeof value === "number" || typeof value === "boolean") return String(value);
      throw new ManentError(
        Code.FailedPrecondition,
        `${shown}: key "${ref.key}" holds ${value === null ? "null" : "an object"}, not a string`,
        {
          details: { ref: shown },
        },
      );
    }
    if (status === 404) throw new ManentError(Code.FailedPrecondition, `${shown}: ${notFound(ref, body)}`, { details: { ref: shown } });
    if (status === 403)
      throw new ManentError(
        Code.PermissionDenied,
        `${shown}: Vault refused to read it (403: the policy of manent's token does not allow it, or no engine is mounted at ${ref.mount})`,
        {
          details: { ref: shown },
        },
      );
    throw this.statusError(status, shown);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.session = undefined;
    this.current = undefined;
  }

  private statusError(status: number, shown: string): ManentError {
    // 5xx (503: sealed or standby), 429 (rate limited), 472/473 (a standby's answer): the store is not there now.
    const retryable = status >= 500 || status === 429 || status === 472 || status === 473;
    const why = statusReasons[status];
    return new ManentError(
      retryable ? Code.Unavailable : Code.FailedPrecondition,
      `${shown}: Vault at ${this.config.address} answered ${status}${why ? ` (${why})` : ""}`,
      {
        details: { ref: shown, status: String(status) },
      },
    );
  }

  private signedIn(shown: string): Promise<Session> {
    if (!this.session) {
      const p = this.signIn(shown).then((s) => {
        if (this.session === p) {
          this.current = s;
          this.scheduleRenewal(s);
        }
        return s;
      });
      this.session = p;
      p.catch(() => {
        if (this.session === p) this.session = undefined;
      });
    }
    return this.session;
  }

  /** Forgets `session` (unless another already replaced it), so the next read signs in anew. */
  private drop(session: Session): void {
    if (this.current !== session) return;
    clearTimeout(this.timer);
    this.current = undefined;
    this.session = undefined;
  }

  /** Whether Vault still knows the token (a 403 on a read is then the policy's, not the token's). */
  private async stillValid(session: Session, shown: string): Promise<boolean> {
    return (await this.request("GET", "auth/token/lookup-self", session.token, shown)).status === 200;
  }

  /** A token: the configured one (looked up for its lease) or an AppRole login's. */
  private async signIn(shown: string): Promise<Session> {
    const auth = this.config.auth;
    if (auth.method === "token") {
      const token = await readSecretRef(`${field}.auth.token`, auth.token).catch((err: unknown) => {
        throw new ManentError(Code.FailedPrecondition, `${shown}: ${ManentError.from(err).message}`, { details: { ref: shown } });
      });
      const { status, body } = await this.request("GET", "auth/token/lookup-self", token, shown);
      if (status === 403 || status === 401)
        throw new ManentError(
          Code.Unauthenticated,
          `${shown}: Vault refused the token of ${field}.auth.token (${status}): it is wrong, expired or revoked`,
          {
            details: { ref: shown },
          },
        );
      if (status !== 200) throw this.statusError(status, shown);
      const data = (body as { data?: { ttl?: number; renewable?: boolean; creation_ttl?: number } }).data ?? {};
      const leaseMs = Math.max(0, Number(data.ttl ?? 0)) * 1000;
      const session = {
        token,
        leaseMs,
        renewable: data.renewable === true,
        fullLeaseMs: Math.max(leaseMs, Number(data.creation_ttl ?? 0) * 1000),
        capped: false,
      };
      this.logger.info("vault: signed in with a token", { ttl_seconds: leaseMs / 1000, renewable: session.renewable });
      return session;
    }
    const read = (name: string, ref: Parameters<typeof readSecretRef>[1]) =>
      readSecretRef(`${field}.auth.${name}`, ref).catch((err: unknown) => {
        throw new ManentError(Code.FailedPrecondition, `${shown}: ${ManentError.from(err).message}`, { details: { ref: shown } });
      });
    const credentials = { role_id: await read("role_id", auth.role_id), secret_id: await read("secret_id", auth.secret_id) };
    const { status, body } = await this.request("POST", `auth/${encodeURIComponent(auth.mount)}/login`, undefined, shown, credentials);
    if (status >= 400 && status < 500 && status !== 429)
      throw new ManentError(
        Code.Unauthenticated,
        `${shown}: Vault refused the AppRole login at auth/${auth.mount} (${status}): a wrong role_id or secret_id, or one expired or used up`,
        { details: { ref: shown } },
      );
    if (status !== 200) throw this.statusError(status, shown);
    const a = (body as { auth?: { client_token?: string; lease_duration?: number; renewable?: boolean } }).auth;
    if (!a?.client_token)
      throw new ManentError(Code.Unavailable, `${shown}: Vault's AppRole login answer holds no token`, { details: { ref: shown } });
    const leaseMs = Math.max(0, Number(a.lease_duration ?? 0)) * 1000;
    this.logger.info("vault: signed in with AppRole", { mount: auth.mount, ttl_seconds: leaseMs / 1000, renewable: a.renewable === true });
    return { token: a.client_token, leaseMs, renewable: a.renewable === true, fullLeaseMs: leaseMs, capped: false };
  }

  /**
   * At two thirds of what is left of the lease: renew it, or (an AppRole token that cannot be
   * renewed further) sign in anew. A token that does not expire needs nothing.
   */
  private scheduleRenewal(session: Session): void {
    clearTimeout(this.timer);
    if (this.closed || session.leaseMs <= 0) return;
    const approle = this.config.auth.method === "approle";
    if (!session.renewable && !approle) return;
    const relogin = approle && (!session.renewable || session.capped);
    if (session.capped && !approle) {
      this.logger.warn("vault: the token reaches its max TTL and cannot be renewed further; give manent a new one", {
        ttl_seconds: session.leaseMs / 1000,
      });
      return;
    }
    this.timer = setTimeout(() => void (relogin ? this.relogin(session) : this.renew(session)), (session.leaseMs * 2) / 3);
    this.timer.unref();
  }

  private async renew(session: Session): Promise<void> {
    try {
      const { status, body } = await this.request("POST", "auth/token/renew-self", session.token, "token renewal", {});
      if (this.closed || this.current !== session) return;
      if (status !== 200) throw this.statusError(status, "token renewal");
      const leaseMs = Math.max(0, Number((body as { auth?: { lease_duration?: number } }).auth?.lease_duration ?? 0)) * 1000;
      session.leaseMs = leaseMs;
      session.capped = leaseMs < session.fullLeaseMs;
      this.logger.info("vault: token renewed", { ttl_seconds: leaseMs / 1000 });
      this.scheduleRenewal(session);
    } catch (err) {
      // The next read signs in again (a new login, or the token read anew).
      this.logger.warn("vault: token renewal failed; the next read signs in again", { error: ManentError.from(err).message });
      this.drop(session);
    }
  }

  private async relogin(old: Session): Promise<void> {
    this.drop(old);
    await this.signedIn("token renewal").catch((err: unknown) => {
      this.logger.warn("vault: a new AppRole login failed; the next read tries again", { error: ManentError.from(err).message });
    });
  }

  private async request(
    method: "GET" | "POST",
    path: string,
    token: string | undefined,
    shown: string,
    body?: unknown,
  ): Promise<VaultAnswer> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (token !== undefined) headers["x-vault-token"] = token;
    if (this.config.namespace) headers["x-vault-namespace"] = this.config.namespace;
    if (body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await this.send(`${this.config.address}/v1/${path}`, {
        method,
        headers,
        redirect: "error",
        signal: AbortSignal.timeout(this.config.timeout),
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw transportFailure(err, shown, `Vault at ${this.config.address}`, this.config.timeout, `${field}.ca_file`);
    }
    if (res.status === 404) {
      // KV v2 answers a deleted or destroyed latest version with 404 and its metadata: read for the error's reason.
      return { status: 404, body: await res.json().catch(() => undefined) };
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => undefined);
      return { status: res.status, body: undefined };
    }
    try {
      return { status: 200, body: await res.json() };
    } catch {
      throw new ManentError(Code.Unavailable, `${shown}: Vault at ${this.config.address} answered 200 with a body that is not JSON`, {
        details: { ref: shown },
      });
    }
  }
}

/**
 * Why Vault answered 404, from its body: KV v2 gives the metadata of a latest version that was
 * deleted (`deletion_time`) or destroyed, and nothing (`{"errors":[]}`) for a path with no secret.
 */
function notFound(ref: VaultSecretRef, body: unknown): string {
  const where = `${ref.mount}/${ref.path}`;
  const meta = (body as { data?: { metadata?: { deletion_time?: unknown; destroyed?: unknown; version?: unknown } } } | undefined)?.data
    ?.metadata;
  const version = typeof meta?.version === "number" ? ` (version ${meta.version})` : "";
  if (meta?.destroyed === true) return `the latest version${version} of the secret at ${where} is destroyed (404)`;
  if (typeof meta?.deletion_time === "string" && meta.deletion_time !== "")
    return `the latest version${version} of the secret at ${where} is deleted (404; undelete it or write a new version)`;
  return `Vault has no secret at ${where} (404: no such path, or no KV v2 engine mounted at ${ref.mount})`;
}
