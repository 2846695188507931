import { Code, ManentError } from "../errors.js";

/** Longest string manent accepts anywhere in a file or a request body (a param may hold a small script). */
export const maxStringLength = 64 * 1024;
/** Deepest nesting and most entries of one document: enough for any real one, bounded for a hostile one. */
const maxDepth = 32;
const maxNodes = 100_000;

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why a string cannot be stored or passed on, or undefined: a NUL (Postgres text cannot hold it,
 * C APIs end there), another control character but tab and line ends, a lone UTF-16 surrogate
 * (not Unicode: Postgres and JSON encoders refuse it), or more than `max` characters.
 */
export function unsafeText(s: string, max = maxStringLength): string | undefined {
  if (s.length > max) return `longer than ${max} characters`;
  if (loneSurrogate.test(s)) return "contains a lone UTF-16 surrogate (not valid Unicode)";
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(s))
    return s.includes("\u0000") ? "contains a NUL character" : "contains a control character";
  return undefined;
}

/** The first key or string of parsed data that cannot be stored or passed on, with its path; also bounds depth and size. */
export function findUnsafe(data: unknown): { path: string[]; reason: string } | undefined {
  let nodes = 0;
  const walk = (v: unknown, path: string[]): { path: string[]; reason: string } | undefined => {
    if (++nodes > maxNodes) return { path, reason: `more than ${maxNodes} values` };
    if (path.length > maxDepth) return { path, reason: `nested more than ${maxDepth} levels` };
    if (typeof v === "string") {
      const why = unsafeText(v);
      return why ? { path, reason: why } : undefined;
    }
    if (Array.isArray(v)) {
      for (const [i, item] of v.entries()) {
        const found = walk(item, [...path, String(i)]);
        if (found) return found;
      }
    } else if (v !== null && typeof v === "object") {
      for (const [k, item] of Object.entries(v)) {
        const why = unsafeText(k, 256);
        if (why) return { path: [...path, k], reason: `key ${why}` };
        const found = walk(item, [...path, k]);
        if (found) return found;
      }
    }
    return undefined;
  };
  return walk(data, []);
}

/**
 * Checks every key and string of parsed data (a YAML document, a JSON body) before any schema sees
 * it: `invalid_argument` naming the file or request part and the field.
 */
export function checkSafeData(data: unknown, file: string): void {
  const found = findUnsafe(data);
  if (!found) return;
  const field = found.path.map((p) => clipKey(p)).join(".") || "(document)";
  throw new ManentError(Code.InvalidArgument, `${file}: ${field}: ${found.reason}`, { details: { file, field } });
}

/** A zod refinement: every key and string of the value passes {@link unsafeText}. */
export function refineSafe(
  value: unknown,
  ctx: { addIssue(issue: { code: "custom"; message: string; path?: PropertyKey[] }): void },
): void {
  const found = findUnsafe(value);
  if (found) ctx.addIssue({ code: "custom", message: found.reason, path: found.path.map((p) => clipKey(p)) });
}

/** A string check for zod `.refine`: the reason, for its message, comes from {@link unsafeText}. */
export const safeText =
  (max = maxStringLength) =>
  (s: string): boolean =>
    unsafeText(s, max) === undefined;

/** A key or value fit to quote in a message: bounded, control characters escaped. */
export function clipKey(s: string, max = 40): string {
  const shown = s.length > max ? `${s.slice(0, max)}…` : s;
  return JSON.stringify(shown).slice(1, -1);
}
