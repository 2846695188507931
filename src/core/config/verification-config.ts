import { z } from "zod";
import { secretRefSchema } from "./secret-ref.js";

const pattern = (what: string) =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9._*-]+$/, { message: `must be a ${what} name or a pattern of lower-case letters, digits, '.', '_', '-' and '*'` });

/** A public key's id, as a policy names it and a deploy records it. */
const keyId = (description: string, example: string) =>
  z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9][A-Za-z0-9@._:/-]*$/, { message: "must be letters, digits, '@', '.', '_', ':', '/' or '-'" })
    .meta({ description, examples: [example] });

const file = (description: string, example: string) =>
  z
    .string()
    .min(1)
    .max(4096)
    .meta({ description, examples: [example] });

const sshSchema = z
  .strictObject({
    allowed_signers: file(
      "The OpenSSH allowed_signers file (ssh-keygen(1) ALLOWED SIGNERS) whose keys may sign, relative to the server's working directory",
      "/etc/manent/allowed_signers",
    ),
    namespace: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[A-Za-z0-9][A-Za-z0-9@._-]*$/, { message: "must be letters, digits, '@', '.', '_' or '-'" })
      .default("manent-artifact")
      .describe('The namespace the signature must be made in (`ssh-keygen -Y sign -n`); default "manent-artifact"'),
  })
  .describe("SSH signatures (`ssh-keygen -Y sign`), checked with `ssh-keygen -Y verify` against allowed_signers");

/** A regular expression from manent.yml: it must compile; it is matched against the whole value. */
const regexp = (description: string, example: string) =>
  z
    .string()
    .min(1)
    .max(1024)
    .refine(
      (s) => {
        try {
          new RegExp(s, "u");
          return true;
        } catch {
          return false;
        }
      },
      { message: "is not a valid regular expression" },
    )
    .meta({ description, examples: [example] });

const threshold = (what: string) =>
  z
    .number()
    .int()
    .min(0)
    .max(10)
    .default(1)
    .describe(`How many ${what} a bundle must carry that verify against trusted_root (default 1, as sigstore-js and cosign)`);

const identitySchema = z
  .strictObject({
    subject: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .meta({
        description: "The certificate's subject alternative name, exactly (an e-mail, or a URI such as a CI workflow's)",
        examples: ["https://github.com/acme/shop/.github/workflows/release.yml@refs/heads/main"],
      }),
    subject_regexp: regexp(
      "A regular expression the whole subject alternative name must match, instead of subject",
      "^https://github\\.com/acme/[^/]+/\\.github/workflows/release\\.yml@refs/tags/v.*$",
    ).optional(),
    issuer: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .meta({
        description: "The OIDC issuer the certificate names (Fulcio's extension 1.3.6.1.4.1.57264.1.8, or the older .1.1), exactly",
        examples: ["https://token.actions.githubusercontent.com"],
      }),
    issuer_regexp: regexp(
      "A regular expression the whole OIDC issuer must match, instead of issuer",
      "^https://accounts\\.example\\.com$",
    ).optional(),
  })
  .refine((i) => (i.subject === undefined) !== (i.subject_regexp === undefined), {
    message: "give exactly one of subject and subject_regexp",
  })
  .refine((i) => (i.issuer === undefined) !== (i.issuer_regexp === undefined), {
    message: "give exactly one of issuer and issuer_regexp",
  })
  .describe("A signer the policy accepts: the certificate's subject alternative name and its OIDC issuer");

const keylessSchema = z
  .strictObject({
    trusted_root: file(
      "The Sigstore trusted root (trusted_root.json, the TrustedRoot JSON format: certificate authorities, transparency logs, CT logs, timestamp authorities), relative to the server's working directory",
      "/etc/manent/trusted_root.json",
    ),
    identities: z
      .array(identitySchema)
      .min(1)
      .max(50)
      .describe("The signers accepted: a certificate must name one of them (subject and issuer alike)"),
    tlog_threshold: threshold("transparency log entries (inclusion promise or proof)"),
    ctlog_threshold: threshold("signed certificate timestamps (SCTs) in the certificate"),
    timestamp_threshold: threshold("verified timestamps (a log entry's integrated time or an RFC 3161 timestamp)"),
  })
  .describe(
    "Keyless bundles: a short-lived certificate from a certificate authority of trusted_root, naming one of identities, checked offline at the time a log or timestamp authority of trusted_root vouches for",
  );

const sigstoreSchema = z
  .strictObject({
    public_keys: z
      .array(
        z.strictObject({
          id: keyId("The key's id: a bundle names it (publicKey.hint) and the deploy records it", "release-2026"),
          file: file("The public key in PEM (SubjectPublicKeyInfo), relative to the server's working directory", "/etc/manent/release.pub"),
        }),
      )
      .min(1)
      .max(50)
      .optional()
      .describe("Keys a Sigstore bundle may be signed with (the bundle's publicKey.hint names one); checked offline"),
    keyless: keylessSchema.optional(),
  })
  .refine((s) => s.public_keys !== undefined || s.keyless !== undefined, { message: "accepts nothing: give public_keys, keyless or both" })
  .refine((s) => new Set((s.public_keys ?? []).map((k) => k.id)).size === (s.public_keys ?? []).length, {
    message: "public_keys ids must be unique",
  })
  .describe(
    "Sigstore bundles (.sigstore.json), verified offline with sigstore-js: signed with one of public_keys, or keyless with a certificate naming one of keyless.identities",
  );

const registrySchema = z
  .strictObject({
    host: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$/, { message: "must be a registry host, with an optional :port" })
      .meta({
        description: "The registry's host as image references name it (`docker.io` is Docker Hub); only listed registries are asked",
        examples: ["registry.acme.example:5000"],
      }),
    ca_file: file("PEM certificates to trust for this registry's TLS beside the system's roots", "/etc/manent/registry-ca.pem").optional(),
    username: z.string().min(1).max(256).optional().describe("The registry user to sign in as (with password); absent: anonymous"),
    password: secretRefSchema
      .meta({
        description: "The registry password or token: a secret reference (`file:PATH` or `env:NAME`)",
        examples: ["file:/etc/manent/registry-password"],
      })
      .optional(),
  })
  .refine((r) => (r.username === undefined) === (r.password === undefined), { message: "give username and password together" })
  .describe("A registry image signatures are fetched from");

const imageSignaturesSchema = z
  .strictObject({
    public_keys: z
      .array(
        z.strictObject({
          id: keyId("The key's id: the deploy records it", "images-2026"),
          file: file("The cosign public key in PEM (cosign.pub), relative to the server's working directory", "/etc/manent/cosign.pub"),
        }),
      )
      .min(1)
      .max(50)
      .describe("Keys an image's cosign signature may be made with (`cosign sign --key`)"),
    registries: z
      .array(registrySchema)
      .min(1)
      .max(50)
      .refine((l) => new Set(l.map((r) => r.host)).size === l.length, { message: "registry hosts must be unique" })
      .describe("The registries images may come from: an image on another registry is refused, and no other host is contacted"),
  })
  .describe(
    "kubernetes artifacts: every container image must be referenced by digest and carry a cosign signature (the `sha256-<digest>.sig` tag in its registry) one of public_keys verifies; implies image_digests",
  );

export const verificationPolicySchema = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(63)
      .regex(/^[a-z0-9][a-z0-9._-]*$/, { message: "must be lower-case letters, digits, '.', '_' or '-'" })
      .meta({ description: "The policy's name: refusals and deploy records name it", examples: ["prod-signed"] }),
    tenant: pattern("tenant").default("*").describe("The tenants it applies to (a name or a pattern, `*` for any)"),
    application: pattern("application").default("*").describe("The applications it applies to (a name or a pattern)"),
    environment: pattern("environment").default("*").describe("The environments it applies to (a name or a pattern, e.g. `prod*`)"),
    ssh: sshSchema.optional(),
    sigstore: sigstoreSchema.optional(),
    image_digests: z
      .boolean()
      .default(false)
      .describe(
        "kubernetes artifacts: every container image must be referenced by digest (name@sha256:…); a tag-only image is refused naming its file and field",
      ),
    image_signatures: imageSignaturesSchema.optional(),
  })
  .refine((p) => p.ssh !== undefined || p.sigstore !== undefined || p.image_digests || p.image_signatures !== undefined, {
    message: "requires nothing: give ssh, sigstore, image_digests or image_signatures",
  });

/**
 * Verified artifacts (`verification` in manent.yml). Operator policy: envconfigs and descriptors,
 * which tenants write, cannot loosen it. Every policy matching a deploy applies.
 */
export const verificationConfigSchema = z
  .strictObject({
    policies: z
      .array(verificationPolicySchema)
      .max(100)
      .default([])
      .refine((list) => new Set(list.map((p) => p.name)).size === list.length, { message: "policy names must be unique" })
      .describe(
        "Verification policies by tenant, application and environment pattern; every policy matching a deploy applies (its artifact must carry a signature one of the policy's keys or signers verifies)",
      ),
  })
  .default({ policies: [] })
  .describe("Verified artifacts: which deploys need a valid signature over their artifact, and from whom (none by default)");

export type VerificationConfig = z.output<typeof verificationConfigSchema>;
export type VerificationPolicy = z.output<typeof verificationPolicySchema>;
