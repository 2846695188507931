import { z } from "zod";

const name = z
  .string()
  .min(1)
  .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, { message: "must be lower-case letters, digits, '.', '_' or '-'" });

export const artifactSchema = z.strictObject({
  type: z.string().min(1),
  name,
  version: z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, { message: "must be letters, digits, '.', '_', '+' or '-'" }),
  source: z.string().min(1),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { message: "must be 64 lower-case hex digits" })
    .optional(),
});

/** What to deploy (`hello.yml`). */
export const descriptorSchema = z.strictObject({
  apiVersion: z.literal("manent/v1", { message: 'must be "manent/v1"' }),
  tenant: name.default("untenanted"),
  application: name,
  environment: name,
  artifact: artifactSchema,
});

export type Descriptor = z.output<typeof descriptorSchema>;
export type DescriptorInput = z.input<typeof descriptorSchema>;
