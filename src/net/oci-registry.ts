import { createHash, X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { rootCertificates } from "node:tls";
import { Code, ManentError } from "../core/errors.js";
import type { CosignSignature, ImageRegistry, PinnedImage, RegistryAccess } from "../core/verification/image-signatures.js";
import { fetchConnecting } from "./fetch-connecting.js";

/** The OCI distribution spec's bound on a manifest a registry must accept; a bigger answer is not a signature manifest. */
const maxManifest = 4 * 1024 * 1024;
/** cosign's simple-signing payload is a few hundred bytes. */
const maxPayload = 256 * 1024;
const maxToken = 64 * 1024;
/** Signatures a manifest may carry that are looked at: cosign appends one layer per signature. */
const maxLayers = 32;
const requestTimeoutMs = 30_000;
const simpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json";
const signatureAnnotation = "dev.cosignproject.cosign/signature";
const manifestTypes = ["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"];

/**
 * Reads cosign's signatures from OCI registries over HTTPS (the distribution API): the manifest at
 * tag `sha256-<hex>.sig`, then each simple-signing layer's blob, checked against its digest. Signs
 * in with HTTP Basic or the bearer-token flow the registry's WWW-Authenticate asks for. Every answer
 * is bounded in size and time; a registry is trusted no further than its answers verify.
 */
export function ociRegistry(): ImageRegistry {
  const transports = new Map<string, Promise<typeof fetch>>();
  const transport = (caFile: string | undefined): Promise<typeof fetch> => {
    const key = caFile ?? "";
    let t = transports.get(key);
    if (!t) {
      t = caFile ? trusting(caFile) : Promise.resolve(fetch);
      transports.set(key, t);
      t.catch(() => transports.delete(key));
    }
    return t;
  };
  return {
    async cosignSignatures(image: PinnedImage, access: RegistryAccess, signal: AbortSignal): Promise<CosignSignature[]> {
      const session = new Session(await transport(access.caFile), image, access, signal);
      const tag = `sha256-${image.digest.slice("sha256:".length)}.sig`;
      const manifest = await session.get(`manifests/${tag}`, manifestTypes.join(", "), maxManifest);
      if (manifest === undefined) return [];
      let parsed: { layers?: unknown };
      try {
        parsed = JSON.parse(manifest.toString("utf8")) as { layers?: unknown };
      } catch {
        throw new Error(`the registry's manifest at ${tag} is not JSON`);
      }
      if (!Array.isArray(parsed.layers)) throw new Error(`the registry's manifest at ${tag} has no layers`);
      const out: CosignSignature[] = [];
      for (const layer of parsed.layers.slice(0, maxLayers) as {
        mediaType?: unknown;
        digest?: unknown;
        annotations?: Record<string, unknown>;
      }[]) {
        const signature = layer?.annotations?.[signatureAnnotation];
        if (layer?.mediaType !== simpleSigning || typeof signature !== "string" || signature.length > 8192) continue;
        if (typeof layer.digest !== "string" || !/^sha256:[a-f0-9]{64}$/.test(layer.digest)) continue;
        const payload = await session.get(`blobs/${layer.digest}`, "*/*", maxPayload);
        if (payload === undefined) throw new Error(`the registry has no blob ${layer.digest} its signature manifest names`);
        if (`sha256:${createHash("sha256").update(payload).digest("hex")}` !== layer.digest) {
          throw new Error(`the registry's blob ${layer.digest} is not the bytes of that digest`);
        }
        out.push({ payload, signature });
      }
      return out;
    },
  };
}

async function trusting(caFile: string): Promise<typeof fetch> {
  let pem: string;
  try {
    pem = await readFile(caFile, "utf8");
  } catch (err) {
    throw new Error(`cannot read the registry's ca_file ${caFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error(`the registry's ca_file ${caFile} holds no PEM certificate`);
  for (const b of blocks) {
    try {
      new X509Certificate(b);
    } catch {
      throw new Error(`the registry's ca_file ${caFile} holds a certificate that does not parse`);
    }
  }
  return fetchConnecting({ ca: [...rootCertificates, ...blocks] });
}

/** One image's conversation with its registry: the authorization it earned is reused for its blobs. */
class Session {
  private authorization: string | undefined;
  private readonly base: string;

  constructor(
    private readonly fetcher: typeof fetch,
    private readonly image: PinnedImage,
    private readonly access: RegistryAccess,
    private readonly signal: AbortSignal,
  ) {
    // Docker Hub's API is not at the name references use.
    const host = image.host === "docker.io" ? "registry-1.docker.io" : image.host;
    this.base = `https://${host}/v2/${image.repository}/`;
  }

  /** The body of a GET under the repository, or undefined on 404; signs in once if asked. */
  async get(path: string, accept: string, limit: number): Promise<Buffer | undefined> {
    let res = await this.request(this.base + path, accept);
    if (res.status === 401 && this.authorization === undefined) {
      await discard(res);
      this.authorization = await this.signIn(res.headers.get("www-authenticate") ?? "");
      res = await this.request(this.base + path, accept);
    }
    if (res.status === 404) {
      await discard(res);
      return undefined;
    }
    if (res.status >= 500 || res.status === 429) {
      await discard(res);
      throw new ManentError(Code.Unavailable, `registry ${this.image.host} answered ${res.status} to GET ${path}`, {
        details: { registry: this.image.host },
      });
    }
    if (res.status !== 200) {
      await discard(res);
      throw new Error(
        `registry ${this.image.host} answered ${res.status} to GET ${path}${res.status === 401 || res.status === 403 ? " (check the policy's username and password)" : ""}`,
      );
    }
    return bounded(res, limit, `registry ${this.image.host}'s answer to GET ${path}`);
  }

  private async request(url: string, accept: string): Promise<Response> {
    try {
      return await this.fetcher(url, {
        headers: { accept, ...(this.authorization && { authorization: this.authorization }) },
        redirect: "manual",
        signal: AbortSignal.any([this.signal, AbortSignal.timeout(requestTimeoutMs)]),
      });
    } catch (err) {
      if (this.signal.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new ManentError(
        Code.Unavailable,
        `registry ${this.image.host} cannot be reached: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
        {
          details: { registry: this.image.host },
        },
      );
    }
  }

  /** HTTP Basic, or the token flow (docker's and the distribution spec's) for a Bearer challenge. */
  private async signIn(challenge: string): Promise<string> {
    const creds = this.access.credentials;
    const basic = creds && `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString("base64")}`;
    if (/^basic\b/i.test(challenge)) {
      if (!basic) throw new Error(`registry ${this.image.host} asks to sign in: give the policy's registry a username and password`);
      return basic;
    }
    if (!/^bearer\b/i.test(challenge)) throw new Error(`registry ${this.image.host} asks to sign in in a way manent does not speak`);
    const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!.toLowerCase(), m[2]!]));
    let realm: URL;
    try {
      realm = new URL(params.realm ?? "");
    } catch {
      throw new Error(`registry ${this.image.host}'s sign-in challenge names no valid realm`);
    }
    if (realm.protocol !== "https:") throw new Error(`registry ${this.image.host}'s token realm is not https`);
    if (params.service) realm.searchParams.set("service", params.service);
    realm.searchParams.set("scope", params.scope ?? `repository:${this.image.repository}:pull`);
    let res: Response;
    try {
      res = await this.fetcher(realm, {
        headers: basic ? { authorization: basic } : {},
        redirect: "manual",
        signal: AbortSignal.any([this.signal, AbortSignal.timeout(requestTimeoutMs)]),
      });
    } catch (err) {
      if (this.signal.aborted) throw err;
      throw new ManentError(Code.Unavailable, `registry ${this.image.host}'s token service ${realm.host} cannot be reached`, {
        details: { registry: this.image.host },
      });
    }
    if (res.status !== 200) {
      await discard(res);
      throw new Error(`registry ${this.image.host}'s token service answered ${res.status} (check the policy's username and password)`);
    }
    const body = await bounded(res, maxToken, `registry ${this.image.host}'s token`);
    let token: unknown;
    try {
      const json = JSON.parse(body.toString("utf8")) as { token?: unknown; access_token?: unknown };
      token = json.token ?? json.access_token;
    } catch {
      token = undefined;
    }
    if (typeof token !== "string" || !/^[\x21-\x7e]+$/.test(token))
      throw new Error(`registry ${this.image.host}'s token service answered no token`);
    return `Bearer ${token}`;
  }
}

/** Reads at most `limit` bytes: a longer answer is refused without reading the rest. */
async function bounded(res: Response, limit: number, what: string): Promise<Buffer> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > limit) {
    await discard(res);
    throw new Error(`${what} is larger than ${limit} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  if (!reader) return Buffer.alloc(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new Error(`${what} is larger than ${limit} bytes`);
    }
    chunks.push(Buffer.from(value));
  }
  return Buffer.concat(chunks);
}

async function discard(res: Response): Promise<void> {
  await res.body?.cancel().catch(() => undefined);
}
