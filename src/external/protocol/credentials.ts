import { credentials, ServerCredentials, type ChannelCredentials, type ChannelOptions } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Identity } from "./mtls.js";

/**
 * TLS credentials for go-plugin's AutoMTLS. Both sides present their own throwaway certificate and
 * trust exactly the peer's (which is a self-signed CA with DNS name `localhost`), so the host's
 * channel to the plugin and the plugin's dial back to a brokered host service both require the
 * pinned peer. The server name is always `localhost`, whatever the socket.
 */
export const tlsChannelOptions: ChannelOptions = {
  "grpc.ssl_target_name_override": "localhost",
  "grpc.default_authority": "localhost",
  // Like go-plugin: messages are local, do not cap them at 4 MiB.
  "grpc.max_receive_message_length": -1,
  "grpc.max_send_message_length": -1,
};

/** Client side: our identity, and only `peerDer` is accepted as the server. */
export function clientCredentials(own: Identity, peerPem: string, peerDer: Buffer): ChannelCredentials {
  return credentials.createSsl(Buffer.from(peerPem), Buffer.from(own.keyPem), Buffer.from(own.certPem), {
    checkServerIdentity: (_host: string, cert: PeerCertificate) =>
      cert.raw.equals(peerDer) ? undefined : new Error("plugin server certificate is not the one announced in the handshake"),
  });
}

/** Server side: our identity; a client must present a certificate issued by `peerPem`'s key. */
export function serverCredentials(own: Identity, peerPem: string): ServerCredentials {
  return ServerCredentials.createSsl(
    Buffer.from(peerPem),
    [{ private_key: Buffer.from(own.keyPem), cert_chain: Buffer.from(own.certPem) }],
    true,
  );
}
