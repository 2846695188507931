import { readFile } from "node:fs/promises";
import { connect, rootCertificates, type ConnectionOptions } from "node:tls";
import { Code, ManentError } from "../core/errors.js";
import { fetchConnecting } from "../net/fetch-connecting.js";
import { clientCertificateRefused } from "./connection-errors.js";

/** `--ca-file`, `--cert-file` and `--key-file` (or MANENT_CA_FILE, MANENT_CLIENT_CERT, MANENT_CLIENT_KEY). */
export interface TlsFlags {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/**
 * The fetch the CLI talks to an https:// server with: trusting the CA of `--ca-file` (instead of
 * the system's roots, as curl's --cacert does) and presenting the client certificate of
 * `--cert-file`/`--key-file` to a server with mutual TLS (undici, Node's own fetch, with a
 * dispatcher of its own). For https:// servers; an http:// one needs none of this.
 */
export async function tlsFetch(flags: TlsFlags): Promise<typeof fetch> {
  if ((flags.certFile === undefined) !== (flags.keyFile === undefined))
    throw new ManentError(
      Code.InvalidArgument,
      flags.certFile === undefined
        ? "--key-file needs --cert-file (MANENT_CLIENT_CERT)"
        : "--cert-file needs --key-file (MANENT_CLIENT_KEY)",
    );
  const [ca, cert, key] = await Promise.all([
    pem("--ca-file", flags.caFile),
    pem("--cert-file", flags.certFile),
    pem("--key-file", flags.keyFile),
  ]);
  const options: ConnectionOptions = { ...(ca && { ca }), ...(cert && { cert }), ...(key && { key }) };
  let send: typeof fetch = globalThis.fetch;
  if (ca ?? cert) send = await fetchConnecting(options);
  return async (input, init) => {
    try {
      return await send(input, init);
    } catch (err) {
      // A server with mutual TLS refuses a client certificate after TLS 1.3's handshake, so fetch
      // sees only a closed socket: a handshake of our own tells why.
      const code = (err as { cause?: { code?: unknown } }).cause?.code;
      if (code !== "UND_ERR_SOCKET" && code !== "ECONNRESET") throw err;
      const refusal = await handshakeRefusal(new URL(input instanceof Request ? input.url : String(input)), options);
      throw refusal ? new TypeError("fetch failed", { cause: refusal }) : err;
    }
  };
}

/**
 * The fetch the CLI talks to the server's OpenID provider with (`manent login`, renewing and
 * revoking its tokens): trusting `--ca-file` as well as the system's roots, since an organisation's
 * private CA often signs its own provider too, while a public provider must still verify. No client
 * certificate: that is for manent-server's mutual TLS. Undefined without `--ca-file` (Node's fetch).
 */
export async function providerFetch(flags: TlsFlags): Promise<typeof fetch | undefined> {
  const ca = await pem("--ca-file", flags.caFile);
  return ca === undefined ? undefined : fetchConnecting({ ca: [...rootCertificates, ca] });
}

/**
 * Why a new connection to the server is refused, if it is: a TLS alert (no client certificate),
 * or, with a client certificate, the server closing the connection after the handshake without
 * an answer (Node's servers drop a certificate their CA did not sign that way, with no alert).
 */
function handshakeRefusal(url: URL, options: ConnectionOptions): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 443), ...options });
    let handshaken = false;
    const done = (err?: Error): void => {
      socket.destroy();
      resolve(err);
    };
    socket.setTimeout(5000, () => done());
    socket.once("secureConnect", () => {
      handshaken = true;
      socket.write(`HEAD /healthz HTTP/1.1\r\nhost: ${url.host}\r\nconnection: close\r\n\r\n`);
    });
    socket.once("data", () => done());
    socket.once("error", (err) => done(err));
    socket.once("close", () =>
      done(
        handshaken && options.cert !== undefined
          ? Object.assign(new Error("the server closed the connection after the TLS handshake: it did not accept the client certificate"), {
              code: clientCertificateRefused,
            })
          : undefined,
      ),
    );
  });
}

async function pem(flag: string, file: string | undefined): Promise<string | undefined> {
  if (file === undefined) return undefined;
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    throw new ManentError(
      Code.InvalidArgument,
      `${flag} ${file}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      {
        details: { file },
      },
    );
  }
}
