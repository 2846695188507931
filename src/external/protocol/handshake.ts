import { z } from "zod";
import { Code, ManentError } from "../../core/errors.js";
import { APP_PROTOCOL_VERSION, CORE_PROTOCOL_VERSION } from "./constants.js";
import { decodeRawBase64 } from "./mtls.js";

/**
 * go-plugin's handshake line, the only thing a plugin writes on stdout:
 * `CORE|APP|NETWORK|ADDR|PROTOCOL|SERVERCERT` (SERVERCERT = the server's DER certificate in
 * standard base64 without padding; empty without AutoMTLS).
 */
export interface Handshake {
  network: "unix" | "tcp";
  address: string;
  /** DER of the certificate the plugin serves with; undefined when it sent none. */
  serverCert?: Buffer;
}

export function formatHandshake(h: { network: "unix" | "tcp"; address: string; serverCertRaw64: string }): string {
  return `${CORE_PROTOCOL_VERSION}|${APP_PROTOCOL_VERSION}|${h.network}|${h.address}|grpc|${h.serverCertRaw64}\n`;
}

const intField = z.string().regex(/^-?\d+$/);

/**
 * Parses a handshake line with go-plugin's rules: at least 4 fields, core version 1, our app
 * version, network unix or tcp, protocol grpc (a missing protocol means net/rpc, refused), a cert
 * field longer than 50 characters is the server certificate. Errors name the plugin.
 */
export function parseHandshake(line: string, plugin: string): Handshake {
  const fail = (msg: string, code: Code = Code.FailedPrecondition): never => {
    throw new ManentError(code, `plugin ${plugin}: ${msg}`, { details: { plugin } });
  };
  const trimmed = line.trim();
  const parts = trimmed.split("|");
  if (parts.length < 4)
    fail(`unrecognized handshake on stdout: ${JSON.stringify(trimmed.slice(0, 200))} (stdout is reserved for the go-plugin handshake)`);
  const [core, app, network, address] = parts as [string, string, string, string];
  if (!intField.safeParse(core).success) fail(`handshake: core protocol version ${JSON.stringify(core)} is not a number`);
  if (Number(core) !== CORE_PROTOCOL_VERSION) {
    fail(
      `incompatible go-plugin core protocol version ${core} (manent speaks ${CORE_PROTOCOL_VERSION}); rebuild the plugin with a current SDK`,
    );
  }
  if (!intField.safeParse(app).success) fail(`handshake: protocol version ${JSON.stringify(app)} is not a number`);
  if (Number(app) !== APP_PROTOCOL_VERSION) {
    fail(
      `incompatible protocol version: plugin speaks ${app}, manent speaks ${APP_PROTOCOL_VERSION}; rebuild the plugin with an SDK for protocol ${APP_PROTOCOL_VERSION}`,
    );
  }
  if (network !== "unix" && network !== "tcp") fail(`handshake: unknown network ${JSON.stringify(network)} (want unix or tcp)`);
  if (address === "") fail("handshake: empty address");
  // The host dials it as given: a TCP address must be host:port (go-plugin announces 127.0.0.1:port).
  if (network === "tcp" && !validTcpAddress(address)) fail(`handshake: tcp address ${JSON.stringify(address)} is not host:port`);
  const protocol = parts[4] ?? "netrpc";
  if (protocol !== "grpc") fail(`unsupported plugin protocol ${JSON.stringify(protocol)}, manent supports only grpc`);
  const h: Handshake = { network: network as "unix" | "tcp", address };
  const cert = parts[5];
  if (cert !== undefined && cert.length > 50) {
    try {
      h.serverCert = decodeRawBase64(cert);
    } catch (err) {
      fail(`handshake: server certificate is not base64: ${(err as Error).message}`);
    }
  }
  return h;
}

function validTcpAddress(address: string): boolean {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(address);
  return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65535;
}
