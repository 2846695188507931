import { z } from "zod";
import { caFile } from "./pem-file.js";
import { isLoopbackHttpUrl } from "../net/loopback.js";
import { durationMs } from "./duration.js";
import { secretRefSchema } from "./secret-ref.js";

/** An http(s) URL; plain http only on a loopback host (a provider on the same machine, as in tests). */
export const httpsUrl = (what: string) =>
  z
    .string()
    .max(2048)
    .superRefine((s, ctx) => {
      let url: URL;
      try {
        url = new URL(s);
      } catch {
        ctx.addIssue({ code: "custom", message: `must be the ${what} URL, e.g. https://login.example.com` });
        return;
      }
      if (url.search || url.hash || url.username || url.password) {
        ctx.addIssue({ code: "custom", message: `must be the ${what} URL without query, fragment or credentials` });
      } else if (url.protocol !== "https:" && !isLoopbackHttpUrl(url)) {
        ctx.addIssue({ code: "custom", message: `must be an https URL (plain http is allowed on a loopback host only): ${s}` });
      }
    });

/**
 * manent.yml's `auth.oidc`: people sign in with an OpenID Connect provider (authorization code
 * with PKCE for the web UI; the CLI's `manent login` through a public client). Their roles come
 * from `auth.grants`, by the groups claim or their e-mail/subject.
 */
export const oidcConfigSchema = z
  .strictObject({
    issuer: httpsUrl("issuer").meta({
      description:
        "The provider's issuer URL; its /.well-known/openid-configuration is read when first needed (again after a failure, so a provider down at start-up is not fatal)",
      examples: ["https://login.example.com/realms/acme"],
    }),
    client_id: z
      .string()
      .min(1)
      .max(256)
      .meta({ description: "The web UI's client id at the provider (a confidential client)", examples: ["manent"] }),
    client_secret: secretRefSchema.meta({
      description: "Where the web UI client's secret is read; it is never logged nor stored",
      examples: ["env:MANENT_OIDC_CLIENT_SECRET", "file:/etc/manent/oidc-client-secret"],
    }),
    cli_client_id: z
      .string()
      .min(1)
      .max(256)
      .optional()
      .meta({
        description:
          "The CLI's public client id (PKCE on a loopback redirect, and the device flow); ID tokens issued to it are accepted as bearer tokens. Default: client_id",
        examples: ["manent-cli"],
      }),
    name: z
      .string()
      .min(1)
      .max(64)
      .default("OpenID Connect")
      .meta({ description: "The provider's name on the web UI's \"Sign in with …\" button", examples: ["Okta", "Keycloak"] }),
    scopes: z
      .array(
        z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, { message: "a scope is printable ASCII without spaces, quotes or backslashes" }),
      )
      .default(["openid", "email", "profile", "groups"])
      .refine((s) => s.includes("openid"), { message: 'must include "openid"' })
      .describe("Scopes asked for at sign-in"),
    groups_claim: z
      .string()
      .min(1)
      .max(128)
      .default("groups")
      .meta({
        description: "The ID token claim that lists the person's groups (matched against auth.grants[].groups)",
        examples: ["groups", "roles"],
      }),
    redirect_url: httpsUrl("redirect")
      .optional()
      .meta({
        description:
          "The URL the provider sends people back to after sign-in (registered at the provider); default: this server's own URL + /auth/callback. Set it behind a proxy",
        examples: ["https://manent.example.com/auth/callback"],
      }),
    ca_file: caFile(
      "CA certificates (PEM) trusted for the provider's https address beside the system's roots, when a private CA signed it; relative to the working directory",
      "/etc/manent/oidc-ca.crt",
    ),
    session_ttl: durationMs
      .default(12 * 3_600_000)
      .refine((ms) => ms >= 60_000 && ms <= 30 * 24 * 3_600_000, { message: "must be between 1m and 720h" })
      .describe("How long a web UI session lasts after sign-in; then the person signs in again"),
  })
  .describe("Sign-in with an OpenID Connect provider (web UI and `manent login`); roles come from auth.grants");

export type OidcConfig = z.output<typeof oidcConfigSchema>;
