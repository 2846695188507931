import { z } from "zod";
import type { HeaderRoute } from "../contract/index.js";

/*
 * Canary steps that shape traffic beside the weight (Argo Rollouts' setHeaderRoute and setMirrorRoute):
 *
 *   - set_header_route: {header: {name: X-Beta, value: "on"}}   # these requests reach the candidate whatever the weight
 *   - set_header_route: {cookie: {name: beta, value: "yes"}}    # changes the match
 *   - set_header_route: false                                   # removes it
 *   - set_mirror: 20                                            # a copy of 20 % of requests to the candidate, answers discarded
 *   - set_mirror: 0                                             # stops mirroring
 *
 * Promote and abort remove both. Names and values are kept to characters every router matches
 * literally (no spaces, quotes or separators), so no plugin has to escape them.
 */

/** A header or cookie name: the usual subset of HTTP's token characters. */
const name = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, "must be letters, digits and _.- (starting with a letter or digit)")
  .describe("The header's or cookie's name (a header's is matched in any case, a cookie's exactly)");
const matchValue = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[A-Za-z0-9._~+/=:@-]+$/, "must be letters, digits and ._~+/=:@- (matched exactly)")
  .describe("The value, matched exactly");

const headerRouteMatch = z
  .strictObject({
    header: z.strictObject({ name, value: matchValue }).optional().describe("Requests with this header value (exact)"),
    cookie: z.strictObject({ name, value: matchValue }).optional().describe("Requests with this cookie value (exact)"),
  })
  // No transform here: a failed refine followed by one would abort this branch of the step union,
  // and the union would then report another branch's "unknown field" instead of this message.
  .refine((m) => (m.header ? 1 : 0) + (m.cookie ? 1 : 0) === 1, { message: "set exactly one of header or cookie" });
type HeaderRouteMatch = z.output<typeof headerRouteMatch>;

/** The plugin's form of a step's match; null for `false` (the route removed). */
export function headerRouteOf(m: HeaderRouteMatch | false): HeaderRoute | null {
  if (m === false) return null;
  return m.header ? { type: "header", ...m.header } : { type: "cookie", ...m.cookie! };
}

export const headerRouteStep = z.strictObject({
  set_header_route: z
    .union([z.literal(false), headerRouteMatch])
    .describe(
      "Send requests with this header or cookie value to the candidate whatever the weight (A/B tests); a later step changes it, `false` removes it",
    ),
});

export const mirrorStep = z.strictObject({
  set_mirror: z
    .number()
    .int()
    .min(0)
    .max(100)
    .describe("Copy this percentage of requests to the candidate too, its answers discarded (0 stops mirroring)"),
});

export type HeaderRouteStep = z.output<typeof headerRouteStep>;
export type MirrorStep = z.output<typeof mirrorStep>;

export function describeHeaderRoute(m: HeaderRouteMatch | false): string {
  const route = headerRouteOf(m);
  return route === null ? "set_header_route off" : `set_header_route ${route.type} ${route.name}=${route.value}`;
}
