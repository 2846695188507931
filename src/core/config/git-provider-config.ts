import { z } from "zod";
import { caFile } from "./pem-file.js";
import { byteSize } from "./artifacts-config.js";
import { durationMs } from "./duration.js";
import { secretRefSchema } from "./secret-ref.js";

/** A repository: a local path, file://, ssh:// or https:// (ext:: and other transports are refused). */
const repositoryUrl = z
  .string()
  .min(1)
  .refine((u) => /^(file|ssh|https):\/\//.test(u) || (u.startsWith("/") && !u.includes("::")), {
    message: "must be an absolute path, file://, ssh:// or https:// URL",
  })
  .refine((u) => !/^https:\/\/[^/]*@/.test(u), { message: "must not hold credentials; give a token reference in git.token" })
  .meta({
    description: "The repository: an absolute path, file://, ssh:// (with known_hosts and ssh_key) or https:// (with token)",
    examples: ["ssh://git@git.example.com/platform/envconfig.git", "https://git.example.com/platform/envconfig.git"],
  });

export const gitProvider = z.strictObject({
  name: z.string().min(1).describe("The provider's name, for messages"),
  type: z.literal("git").describe("Envconfigs are YAML files in a git repository, read at one fetched commit"),
  git: z
    .strictObject({
      repository: repositoryUrl,
      ref: z
        .string()
        .regex(/^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/, { message: "must be a branch, tag or commit (letters, digits, . _ / -)" })
        .default("main")
        .describe("The branch, tag or commit tracked; a tag or commit that changes is refused"),
      path: z
        .string()
        .refine((p) => p.includes("{application}") && p.includes("{environment}"), {
          message: "must contain {application} and {environment} (and usually {tenant} and {artifact})",
        })
        .refine((p) => !p.startsWith("/") && !p.split("/").includes(".."), {
          message: "must be relative to the repository root, without ..",
        })
        .meta({
          description:
            "Where an envconfig is, relative to the repository root; {tenant}, {application}, {artifact} and {environment} are replaced",
          examples: ["{tenant}/{application}/{artifact}/{environment}.yml"],
        }),
      interval: durationMs.default(60_000).describe("How often the repository is fetched again"),
      max_file_size: byteSize.default(1024 ** 2).describe('Largest envconfig file read, e.g. "1MiB" (default 1MiB)'),
      max_checkout_size: byteSize
        .default(256 * 1024 ** 2)
        .describe(
          'Largest commit read, its files summed, e.g. "256MiB" (default 256MiB); a fetch is stopped while it is received once it passes that (the force-push check, which fetches history, four times that)',
        ),
      known_hosts: z
        .string()
        .min(1)
        .optional()
        .describe("ssh://: the pinned host key, as known_hosts text or the absolute path of a known_hosts file; other keys are refused"),
      ssh_key: secretRefSchema.optional().meta({
        description: "ssh://: where the private key is read (env:NAME or file:/path); written owner-only to a temp file for one fetch",
        examples: ["file:/etc/manent/envconfig-deploy-key"],
      }),
      token: secretRefSchema.optional().meta({
        description: "https://: where the access token is read (env:NAME or file:/path); sent as an HTTP header, never in the URL",
        examples: ["env:ENVCONFIG_GIT_TOKEN"],
      }),
      ca_file: caFile(
        "https://: the CA certificates (PEM) the server's certificate is checked against instead of the system's, when a private CA signed it; relative to the working directory",
        "/etc/manent/git-ca.crt",
      ),
      allow_force_push: z
        .boolean()
        .default(false)
        .describe(
          "Follow a branch whose new head does not descend from the last fetched commit (reported either way); false: keep the last commit",
        ),
    })
    .refine((g) => !g.repository.startsWith("ssh://") || g.known_hosts !== undefined, {
      message: "an ssh:// repository needs known_hosts (the pinned host key)",
      path: ["known_hosts"],
    })
    .describe("The git provider's settings"),
});
export type GitProviderSpec = z.output<typeof gitProvider>;
