import { z } from "zod";

const pemFile = (description: string, example: string) =>
  z
    .string()
    .min(1)
    .optional()
    .meta({ description, examples: [example] });

/** manent.yml `tls`: HTTPS served by manent-server itself, or the declaration that a TLS proxy is in front. */
export const tlsConfigSchema = z
  .strictObject({
    cert_file: pemFile(
      "The server's certificate (PEM, followed by its intermediates), relative to the working directory; reloaded when the file changes",
      "/etc/manent/tls/tls.crt",
    ),
    key_file: pemFile(
      "The private key of cert_file (PEM), relative to the working directory; reloaded when the file changes",
      "/etc/manent/tls/tls.key",
    ),
    client_ca_file: pemFile(
      "Mutual TLS: the CA certificates (PEM) that sign client certificates; every client must then present one. Reloaded when the file changes",
      "/etc/manent/tls/clients-ca.crt",
    ),
    behind_proxy: z
      .boolean()
      .default(false)
      .describe(
        "A TLS-terminating proxy (load balancer, ingress) is in front of this server and clients reach it only through it: " +
          "allows listening on a non-loopback address without cert_file",
      ),
  })
  .superRefine((tls, ctx) => {
    if (tls.cert_file !== undefined && tls.key_file === undefined)
      ctx.addIssue({ code: "custom", path: ["key_file"], message: "cert_file needs its key_file" });
    if (tls.key_file !== undefined && tls.cert_file === undefined)
      ctx.addIssue({ code: "custom", path: ["cert_file"], message: "key_file needs its cert_file" });
    if (tls.client_ca_file !== undefined && tls.cert_file === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["client_ca_file"],
        message: "mutual TLS needs the server's own certificate: give cert_file and key_file too",
      });
    if (tls.cert_file === undefined && tls.key_file === undefined && !tls.behind_proxy)
      ctx.addIssue({
        code: "custom",
        message: "give cert_file and key_file (manent-server serves HTTPS), or behind_proxy: true (a TLS proxy is in front)",
      });
  })
  .optional()
  .describe(
    "HTTPS (TLS 1.2 or newer). Without it the server speaks plain HTTP and refuses to listen on a non-loopback address unless behind_proxy is true",
  );

export type TlsConfig = z.output<typeof tlsConfigSchema>;

/** Whether clients reach this server over TLS: its own (cert_file) or a proxy's (behind_proxy); e.g. for Secure cookies. */
export function clientsUseTls(tls: TlsConfig): boolean {
  return tls !== undefined && (tls.cert_file !== undefined || tls.behind_proxy);
}
