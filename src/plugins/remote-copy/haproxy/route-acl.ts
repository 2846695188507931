import type { HeaderRoute } from "../../../core/contract/index.js";
import { Code, ManentError } from "../../../core/errors.js";
import type { HaproxyRuntime } from "./runtime-api.js";

/*
 * A `set_header_route` on HAProxy: haproxy.cfg loads an ACL file matched as a regular expression
 * against all the request's headers and sends matching requests to the tester backend, where
 * only the candidate's servers are ready:
 *
 *   acl manent_route req.hdrs -m reg -f /etc/haproxy/manent-route.acl
 *   use_backend hello_testers if manent_route
 *
 * manent changes the ACL's patterns through the runtime API (`add acl`, `del acl`), with no reload,
 * so any header or cookie name can be matched without touching haproxy.cfg. The file itself is
 * never written: patterns added at run time are lost when HAProxy restarts (then no request
 * matches, and everyone follows the weights).
 */

/** A name or value as the envconfig allows it, with `.` and `+` made literal for PCRE. */
function literal(s: string): string {
  return s.replace(/[.+]/g, (c) => `[${c}]`);
}

/**
 * The pattern matching `route` in `req.hdrs` (one `name: value` line per header, names in lower
 * case): the header's value exactly, or the cookie among the Cookie header's pairs. It has no
 * space, backslash or `;`, which the runtime API's command line would split or end on (the names
 * and values the envconfig allows need no more escaping than `.` and `+`).
 */
export function routePattern(route: HeaderRoute): string {
  const line = "(^|[[:cntrl:]])";
  const end = "[[:blank:]]*([[:cntrl:]]|$)";
  if (route.type === "header") return `${line}(?i:${literal(route.name)}):[[:blank:]]*${literal(route.value)}${end}`;
  // After `cookie:` directly or after a character no cookie name has (`;`, a blank), and up to one no value has.
  const before = "(:|:[^[:cntrl:]]*[^=A-Za-z0-9_.-])";
  return `${line}(?i:cookie)${before}${literal(route.name)}=${literal(route.value)}([^A-Za-z0-9._~+/=:@-]|$)`;
}

export class RouteAcl {
  constructor(
    private readonly api: HaproxyRuntime,
    /** The ACL file as haproxy.cfg loads it (`-f`), which is how the runtime API names it. */
    private readonly file: string,
  ) {}

  /** The ACL's entries now (`show acl <file>`: one `<ref> <pattern>` line each). */
  async entries(signal?: AbortSignal): Promise<{ ref: string; pattern: string }[]> {
    const answer = await this.api.command(`show acl ${this.file}`, signal);
    if (!/^(0x[0-9a-f]+ .*\n?)*$/.test(answer.trim() === "" ? "" : `${answer.trim()}\n`)) {
      throw new ManentError(Code.FailedPrecondition, `haproxy at ${this.api.describe()}: show acl ${this.file}: ${answer.trim()}`, {
        details: { haproxy_socket: this.api.describe(), param: "haproxy_route_acl" },
      });
    }
    return answer
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => ({ ref: l.slice(0, l.indexOf(" ")), pattern: l.slice(l.indexOf(" ") + 1) }));
  }

  /**
   * Makes `route` the only pattern (none for null): the new one is added before the others are
   * deleted, so a request matching both the old and the new route never misses the candidate.
   */
  async set(route: HeaderRoute | null, signal?: AbortSignal): Promise<void> {
    const wanted = route ? routePattern(route) : undefined;
    const now = await this.entries(signal);
    if (wanted && !now.some((e) => e.pattern === wanted)) await this.api.set(`add acl ${this.file} ${wanted}`, signal);
    // By reference: whatever an entry's pattern, `#<ref>` names exactly it.
    for (const e of now) if (e.pattern !== wanted) await this.api.set(`del acl ${this.file} #${e.ref}`, signal);
  }

  /** Dry-run: HAProxy has loaded the ACL file (else `haproxy_route_acl` names nothing haproxy.cfg uses). */
  async check(signal?: AbortSignal): Promise<string | undefined> {
    const list = await this.api.command("show acl", signal);
    if (list.split("\n").some((l) => l.split(" ")[1] === `(${this.file})`)) return undefined;
    return `haproxy_route_acl ${this.file} is not an ACL file haproxy.cfg loads (acl … req.hdrs -m reg -f ${this.file})`;
  }
}
