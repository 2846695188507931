import { z } from "zod";
import { roleNames } from "../identity/grants.js";
import { oidcConfigSchema } from "./oidc-config.js";
import { secretRefSchema } from "./secret-ref.js";
import { checkWorkloadIdentities, workloadIdentitySchema } from "./workload-identity-config.js";

/**
 * manent.yml's `auth` section: who may call the API (static tokens, people through `grants`) and
 * what each may do where. A token or grant names one built-in role and the tenant, application and
 * environment patterns it applies to (`*` for any run of characters: `prod*`, `*`).
 */

// Names as descriptors allow them (lower-case letters, digits, '.', '_', '-'), plus `*`.
const pattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, { message: `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'` });

const role = z.enum(roleNames).meta({
  description:
    "A built-in role: viewer (read), deployer (read, dry-run, submit, rollback, cancel, abort), approver (read, approve, promote, abort), admin (everything)",
  examples: ["deployer"],
});

const token = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(200)
      .meta({ description: "The token's name, for logs, the audit log and deploys' submitted_by", examples: ["ci"] }),
    tenant: pattern("tenant").meta({
      description: 'The tenants this token may act on: a name, a pattern, or "*" for every tenant',
      examples: ["team-a", "*"],
    }),
    role: role.default("admin").describe("What the token may do there (default admin: everything, as before roles existed)"),
    application: pattern("application")
      .default("*")
      .meta({ description: "The applications it may act on", examples: ["shop", "*"] }),
    environment: pattern("environment")
      .default("*")
      .meta({ description: "The environments it may act on", examples: ["dev*", "*"] }),
    token: secretRefSchema.optional().meta({ description: "Where the token's value is read", examples: ["env:MANENT_CI_TOKEN"] }),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, { message: "must be 64 lower-case hex digits" })
      .optional()
      .describe("Hex sha256 of the token, when the value itself is not kept on the server"),
    groups: z
      .array(z.string().min(1).max(256))
      .max(50)
      .default([])
      .meta({
        description:
          "Groups the token counts as a member of for approvals that name `approvers.from_groups` (a person's come from the groups claim); they give no role",
        examples: [["release-managers"]],
      }),
  })
  .refine((t) => (t.token === undefined) !== (t.sha256 === undefined), { message: "give exactly one of token or sha256" });

const grant = z
  .strictObject({
    role,
    groups: z
      .array(z.string().min(1).max(256))
      .default([])
      .meta({
        description: "People in any of these groups (the OpenID Connect groups claim) get the role",
        examples: [["release-managers"]],
      }),
    users: z
      .array(z.string().min(1).max(256))
      .default([])
      .meta({
        description: "People with one of these e-mail addresses (verified by the provider: email_verified true) or subjects get the role",
        examples: [["alice@example.com"]],
      }),
    tenant: pattern("tenant").default("*").describe("The tenants where the role applies"),
    application: pattern("application").default("*").describe("The applications where the role applies"),
    environment: pattern("environment")
      .default("*")
      .meta({ description: "The environments where the role applies", examples: ["prod*"] }),
  })
  .refine((g) => g.groups.length > 0 || g.users.length > 0, { message: "name the groups or users the role is granted to" });

export const authConfigSchema = z
  .strictObject({
    tokens: z.array(token).default([]).describe("API tokens; none (and no other way to sign in): the API is open, on loopback only"),
    grants: z.array(grant).default([]).describe("Roles of people signed in with OpenID Connect, by group or user, and where they apply"),
    oidc: oidcConfigSchema.optional(),
    workload_identities: z
      .array(workloadIdentitySchema)
      .max(500)
      .default([])
      .describe(
        "CI jobs that call the API with their own OpenID Connect ID token (GitHub Actions, GitLab CI), by issuer, audience and claims; a token matching several entries gets all their roles",
      ),
  })
  .superRefine((auth, ctx) => {
    checkWorkloadIdentities(auth.workload_identities, ctx, ["workload_identities"]);
    // A person's ID token (issued to the web UI's or the CLI's client) must never pass for a CI job's.
    const people = auth.oidc && [auth.oidc.client_id, auth.oidc.cli_client_id ?? auth.oidc.client_id];
    for (const [i, w] of auth.workload_identities.entries()) {
      if (people && sameIssuer(w.issuer, auth.oidc!.issuer) && people.includes(w.audience)) {
        ctx.addIssue({
          code: "custom",
          path: ["workload_identities", i, "audience"],
          message: `${w.audience} is a client id of auth.oidc at the same issuer: people's ID tokens would pass for this CI job's; give the jobs an audience of their own`,
        });
      }
    }
  })
  .default({ tokens: [], grants: [], workload_identities: [] })
  .describe("Who may call the API, and what each may do where");

export type AuthConfig = z.output<typeof authConfigSchema>;
export type TokenConfig = AuthConfig["tokens"][number];
export type GrantConfig = AuthConfig["grants"][number];

function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}
