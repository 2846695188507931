import { z } from "zod";
import { roleNames } from "../identity/grants.js";
import { oidcConfigSchema } from "./oidc-config.js";
import { secretRefSchema } from "./secret-ref.js";

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
  })
  .default({ tokens: [], grants: [] })
  .describe("Who may call the API, and what each may do where");

export type AuthConfig = z.output<typeof authConfigSchema>;
export type TokenConfig = AuthConfig["tokens"][number];
export type GrantConfig = AuthConfig["grants"][number];
