import { z } from "zod";
import { safeText } from "./safe-text.js";

const name = z
  .string()
  .min(1)
  .max(63, { message: "must be at most 63 characters" })
  .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, { message: "must be lower-case letters, digits, '.', '_' or '-'" });

/** A release's version: also a rollback's `to`, which plugins may use in paths, so no '/' and no leading '.'. */
export const versionSchema = z
  .string()
  .min(1)
  .max(128, { message: "must be at most 128 characters" })
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, { message: "must be letters, digits, '.', '_', '+' or '-' (starting with a letter or digit)" });

export const artifactSchema = z.strictObject({
  type: z
    .string()
    .min(1)
    .max(63, { message: "must be at most 63 characters" })
    .regex(/^[A-Za-z0-9][A-Za-z0-9._/+-]*$/, { message: "must be letters, digits, '.', '_', '/', '+' or '-'" })
    .meta({
      description: "The kind of artifact; a plugin's supports() decides from it when the envconfig names no plugin",
      examples: ["tarball", "kubernetes"],
    }),
  name: name.meta({ description: "The artifact's name: the {artifact} part of the envconfig path", examples: ["hello"] }),
  version: versionSchema.meta({ description: "The version to deploy (`manent deploy --version` overrides it)", examples: ["1.0.0"] }),
  source: z
    .string()
    .min(1)
    .max(4096, { message: "must be at most 4096 characters" })
    .refine(safeText(4096), { message: "must not contain NUL, control characters or lone surrogates" })
    .meta({
      description:
        "Where the artifact is: a local path (relative to the descriptor; the CLI uploads it), an upload (upload:<sha256>/<file>), or a server path or http(s) URL manent.yml allows (`--source` overrides it)",
      examples: ["dist/hello-1.0.0.tar.gz"],
    }),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { message: "must be 64 lower-case hex digits" })
    .optional()
    .describe("Expected sha256 of the artifact's bytes, checked after the fetch (`--sha256` overrides it)"),
  signature: z
    .string()
    .min(1)
    .max(4096, { message: "must be at most 4096 characters" })
    .refine(safeText(4096), { message: "must not contain NUL, control characters or lone surrogates" })
    .optional()
    .meta({
      description:
        "Where the artifact's signature is (an SSH signature or a Sigstore bundle), in the forms artifact.source takes; absent: the CLI sends <source>.sig or <source>.sigstore.json when one lies beside a local artifact",
      examples: ["dist/hello-1.0.0.tar.gz.sig"],
    }),
});

/** What to deploy (`hello.yml`). */
export const descriptorSchema = z.strictObject({
  apiVersion: z.literal("manent/v1", { message: 'must be "manent/v1"' }).describe("The descriptor format"),
  tenant: name.default("untenanted").describe("The team that owns the application; a tenant's token sees only its tenant's deploys"),
  application: name.meta({ description: "The application", examples: ["hello"] }),
  environment: name.meta({
    description: "The environment to deploy to: the {environment} part of the envconfig path",
    examples: ["test", "prod"],
  }),
  artifact: artifactSchema.describe("What is deployed"),
});

export type Descriptor = z.output<typeof descriptorSchema>;
export type DescriptorInput = z.input<typeof descriptorSchema>;
