import { z } from "zod";
import { caFile } from "./pem-file.js";
import { durationMs } from "./duration.js";
import { secretRefSchema } from "./secret-ref.js";
import { isLoopbackHost } from "../net/loopback.js";

/**
 * A store's API address: https, or http on loopback only (a token sent in clear over a network
 * is a token given away).
 */
const storeAddress = (what: string, example: string) =>
  z
    .string()
    .max(2048)
    .superRefine((value, ctx) => {
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        ctx.addIssue({ code: "custom", message: "must be an http(s) URL, e.g. https://vault.example.com:8200" });
        return;
      }
      if (url.username || url.password) ctx.addIssue({ code: "custom", message: "must not hold credentials" });
      if (url.search || url.hash || (url.pathname !== "/" && url.pathname !== ""))
        ctx.addIssue({ code: "custom", message: "must be the server's address only (no path, query or fragment)" });
      if (url.protocol === "http:" && !isLoopbackHost(url.hostname))
        ctx.addIssue({ code: "custom", message: "http:// is allowed on loopback only; use https://" });
      else if (url.protocol !== "https:" && url.protocol !== "http:") ctx.addIssue({ code: "custom", message: "must be http(s)" });
    })
    .transform((value) => new URL(value).origin)
    .meta({ description: what, examples: [example] });

/** A path prefix of a tenant: whole segments (`secret/team-a` allows `secret/team-a/db`, not `secret/team-ab`). */
const vaultPrefix = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9._-]*(\/[A-Za-z0-9_][A-Za-z0-9._-]*)*\/?$/, {
    message: 'must be "mount/path…" segments of letters, digits, ".", "_", "-" (no leading "/", no "..")',
  })
  .transform((p) => p.replace(/\/$/, ""));

const tenantName = z.string().min(1).max(128);

const vaultStoreSchema = z
  .strictObject({
    address: storeAddress("The Vault (or OpenBao) API's address", "https://vault.example.com:8200"),
    ca_file: caFile(
      "PEM file of the CA certificates the Vault server's certificate is checked against (absent: the system's)",
      "/etc/manent/vault-ca.pem",
    ),
    namespace: z
      .string()
      .regex(/^[A-Za-z0-9_][A-Za-z0-9._/-]*$/, { message: "must be a Vault namespace path (letters, digits, '.', '_', '-', '/')" })
      .optional()
      .describe("The Vault Enterprise namespace every request is sent in (X-Vault-Namespace); absent: the root"),
    auth: z
      .discriminatedUnion("method", [
        z.strictObject({
          method: z.literal("token").describe("A Vault token, renewed before it expires when it is renewable"),
          token: secretRefSchema.meta({
            description: "Where the token is read (env:NAME or file:/path); read again when Vault refuses it (a rotated file)",
            examples: ["env:VAULT_TOKEN"],
          }),
        }),
        z.strictObject({
          method: z
            .literal("approle")
            .describe("AppRole login; the token it gives is renewed, and a new login made when it can no longer be"),
          mount: z
            .string()
            .regex(/^[A-Za-z0-9_][A-Za-z0-9._-]*$/, { message: "must be an auth mount name" })
            .default("approle")
            .describe('Where the AppRole auth method is mounted (default "approle")'),
          role_id: secretRefSchema.meta({
            description: "Where the role_id is read (env:NAME or file:/path)",
            examples: ["file:/etc/manent/vault-role-id"],
          }),
          secret_id: secretRefSchema.meta({
            description: "Where the secret_id is read (env:NAME or file:/path), at each login",
            examples: ["env:VAULT_SECRET_ID"],
          }),
        }),
      ])
      .describe("How manent signs in to Vault; the credentials are env: or file: references, never values"),
    timeout: durationMs.default(10_000).describe("How long one request to Vault may take before the read fails as unavailable (retried)"),
    tenants: z
      .record(tenantName, z.array(vaultPrefix).min(1).describe("Path prefixes (mount/path…) this tenant's envconfigs may reference"))
      .default({})
      .meta({
        description:
          "The paths each tenant's envconfigs may reference, by tenant, as mount/path prefixes of whole segments; a reference outside them is refused at submission (a tenant not listed may reference none)",
        examples: [{ "team-a": ["secret/team-a/"], "team-b": ["secret/team-b/", "shared/team-b/"] }],
      }),
  })
  .describe("A Vault-API server (HashiCorp Vault, OpenBao) whose KV v2 secrets envconfigs reference as vault:mount/path#key");

const kubeStoreSchema = z
  .strictObject({
    server: storeAddress("The Kubernetes API server's address", "https://kube.example.com:6443"),
    ca_file: caFile("PEM file of the cluster's CA (a service account token Secret's ca.crt)", "/etc/manent/kube-ca.pem"),
    token: secretRefSchema.meta({
      description:
        "Where the service account token is read (env:NAME or file:/path, e.g. a projected token), at each read; the account needs get on the Secrets referenced",
      examples: ["file:/var/run/secrets/kubernetes.io/serviceaccount/token"],
    }),
    timeout: durationMs
      .default(10_000)
      .describe("How long one request to the API server may take before the read fails as unavailable (retried)"),
    tenants: z
      .record(
        tenantName,
        z
          .array(z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { message: "must be a namespace (a DNS-1123 label)" }))
          .min(1)
          .describe("Namespaces whose Secrets this tenant's envconfigs may reference"),
      )
      .default({})
      .meta({
        description:
          "The namespaces whose Secrets each tenant's envconfigs may reference, by tenant; a reference to another is refused at submission (a tenant not listed may reference none)",
        examples: [{ "team-a": ["team-a-secrets"] }],
      }),
  })
  .describe("A Kubernetes API server whose Secrets envconfigs reference as k8s:namespace/name#key");

export const secretStoresConfigSchema = z
  .strictObject({
    vault: vaultStoreSchema.optional(),
    kubernetes: kubeStoreSchema.optional(),
  })
  .default({})
  .describe(
    "External secret stores that envconfig secrets may reference (vault:, k8s:); configured by the operator only, tenants reference the paths allowed to them",
  );

export type SecretStoresConfig = z.output<typeof secretStoresConfigSchema>;
export type VaultStoreConfig = z.output<typeof vaultStoreSchema>;
export type KubeStoreConfig = z.output<typeof kubeStoreSchema>;
