import { isIPv4, isIPv6 } from "node:net";
import { z } from "zod";

const sizeUnits: Record<string, number> = {
  "": 1,
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
};

/** A size: a number of bytes or a string such as "512MiB", "1GiB", "100MB". */
export const byteSize = z.union([z.number().int().positive(), z.string()]).transform((value, ctx) => {
  if (typeof value === "number") return value;
  const m = /^(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?$/i.exec(value.trim());
  const unit = sizeUnits[(m?.[2] ?? "").toLowerCase()];
  if (!m || unit === undefined || Number(m[1]) <= 0) {
    ctx.addIssue({ code: "custom", message: `"${value}" is not a size (use e.g. 512MiB, 1GiB, 100MB or a number of bytes)` });
    return z.NEVER;
  }
  return Math.round(Number(m[1]) * unit);
});

const cidr = z
  .string()
  .max(64)
  .refine(
    (s) => {
      const [addr, bits, ...rest] = s.split("/");
      if (rest.length || addr === undefined) return false;
      const max = isIPv4(addr) ? 32 : isIPv6(addr) ? 128 : 0;
      if (!max) return false;
      return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= max);
    },
    { message: 'must be an IP address or a CIDR range, e.g. "10.1.0.0/16" or "fd00::/8"' },
  );

const allowedUrl = z
  .string()
  .max(2048)
  .refine((s) => /^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(s) && URL.canParse(s.replace(/:\*(?=\/|$)/, "")), {
    message: 'must be an http(s) URL prefix without query, e.g. "https://releases.example.com/hello/" (port "*" for any port)',
  });

const defaultCacheSize = 10 * 1024 ** 3;

/**
 * Where artifacts may come from (`artifacts` in manent.yml). The server reads no file of its own
 * and fetches no URL unless listed here; a client's local file reaches it as an upload.
 */
export const artifactsConfigSchema = z
  .strictObject({
    allowed_paths: z
      .array(z.string().min(1).max(4096))
      .max(100)
      .default([])
      .describe(
        "Server-side directories a deploy's artifact.source may name (absolute path or file:// URL), links resolved; none by default",
      ),
    allowed_urls: z
      .array(allowedUrl)
      .max(100)
      .default([])
      .describe('http(s) URL prefixes a deploy\'s artifact.source may name, e.g. "https://releases.example.com/"; none by default'),
    allowed_networks: z
      .array(cidr)
      .max(100)
      .default([])
      .describe(
        "Addresses an allowed URL, a callback or an analysis check may reach although they are loopback, private, link-local or otherwise not public (CIDR ranges)",
      ),
    max_upload_size: byteSize.default(1024 ** 3).describe('Largest artifact a client may upload, e.g. "512MiB" (default 1GiB)'),
    cache_size: byteSize
      .default(defaultCacheSize)
      .describe(
        "Size the artifacts cache in the workdir is kept under, the least recently used artifacts removed first; one a deploy in progress uses is never removed (default 10GiB)",
      ),
  })
  .default({ allowed_paths: [], allowed_urls: [], allowed_networks: [], max_upload_size: 1024 ** 3, cache_size: defaultCacheSize })
  .describe(
    "Where deploys' artifacts may come from besides clients' uploads: server paths and URLs (none by default), the upload size limit and the size of the artifacts cache",
  );

export type ArtifactsConfig = z.output<typeof artifactsConfigSchema>;
