/** Who signed an artifact, as one method found it. */
export interface Verified {
  method: "ssh" | "sigstore" | "cosign";
  /** The key: an SSH key's fingerprint (SHA256:…), a Sigstore public key's id and fingerprint, or `certificate SHA256:…` (a keyless certificate's fingerprint). */
  key: string;
  /** The signer: an allowed_signers principal (ssh), or a keyless certificate's subject alternative name (sigstore). */
  identity?: string;
  /** A keyless certificate's OIDC issuer (sigstore). */
  issuer?: string;
  /** The SSH key's type (ED25519, RSA, ECDSA…). */
  key_type?: string;
}

/** One policy's verdict on a deploy's artifact: recorded in the fetch step's output and the deploy record. */
export interface ArtifactVerification extends Verified {
  policy: string;
  /** The bytes verified: `sha256:<hex>` (an image's manifest digest, for cosign). */
  digest: string;
  /** cosign: the container image, as the manifests name it. */
  image?: string;
}
