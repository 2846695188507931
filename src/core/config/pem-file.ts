import { z } from "zod";

/** The path of a PEM file of CA certificates (an OIDC provider's, a git host's), relative to the working directory. */
export const caFile = (description: string, example: string) =>
  z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .meta({ description, examples: [example] });
