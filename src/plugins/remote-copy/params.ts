import { resolve } from "node:path";
import { z } from "zod";
import { parseDuration } from "../../core/config/duration.js";
import { targetId, type Target } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { haproxyNamePattern, parseRuntimeAddress } from "./haproxy/runtime-api.js";
import { slotPortsParam } from "./slot-params.js";

const duration = z
  .string()
  .transform((v, ctx) => {
    const ms = parseDuration(v.trim());
    if (ms === undefined) {
      ctx.addIssue({ code: "custom", message: "must be a duration such as 500ms, 60s, 2m or 1h" });
      return z.NEVER;
    }
    return ms;
  })
  .refine((ms) => ms > 0, { message: "must be greater than zero" });

const fingerprint = /^SHA256:[A-Za-z0-9+/]{43}=?$/;

/**
 * Params of the `remote-copy` plugin (envconfig `params`, all strings).
 *
 * - `transport`: `local` (the manent worker's own filesystem) or `ssh` (default).
 * - `base`: absolute directory on each target holding `releases/<version>` and the `current`
 *   symlink. `{host}` is replaced by the target's host, so several local targets get distinct dirs.
 *   With transport local it may be relative: to the server's working directory, as `workdir` is
 *   (so an example's targets stay in its own directory).
 * - `keep_releases`: how many releases to keep on each target (default 5, at least 2); the current
 *   and the previous release are never deleted.
 * - `activate`: optional shell command run with `sh -c` in the new release dir after `current`
 *   points to it, with MANENT_VERSION, MANENT_ENVIRONMENT, MANENT_APPLICATION, MANENT_RELEASE_DIR
 *   set. A non-zero exit fails the target (the engine then rolls back). Also re-run by rollback.
 * - `activate_timeout`: limit for `activate` (default 60s).
 *
 * Percentage rollouts (slots and traffic, see `slot-params.ts` for the parsing):
 * - `slot_ports`: `blue=8081,green=8082`: the two slots of each host and the port each serves.
 *   A target label `slot_ports` overrides it (several targets on one machine need their own
 *   ports). With it, `activate` also gets MANENT_SLOT, MANENT_PORT, MANENT_BASE and MANENT_HOST,
 *   and a deploy or rollback activates the host's live slot.
 * - `deactivate`: shell command that stops a slot (same environment as `activate`), run when a
 *   slot is retired or a candidate reverted, once HAProxy sends it no more connections.
 * - `haproxy_socket`: HAProxy's runtime API (`stats socket … level admin`): a unix socket path
 *   on the manent worker or `host:port`.
 * - `haproxy_backend`: the backend holding one server per host and slot.
 * - `haproxy_server`: the servers' names, `{host}`, `{name}` and `{slot}` replaced (default `{name}_{slot}`).
 * - `haproxy_tester_backend`: the backend testers' requests go to (chosen in haproxy.cfg by a
 *   header or cookie rule); manent keeps only the candidate's servers ready in it.
 * - `haproxy_route_acl`: the ACL file of `set_header_route` steps (haproxy/route-acl.ts).
 * - `tester_header`: how testers reach the candidate (e.g. `X-Canary: always`), reported as is.
 * - `drain_timeout`: how long to wait for a slot's connections to end before stopping it
 *   (default 60s).
 *
 * SSH transport only:
 * - `user`: login user (required).
 * - `ssh_key_secret`: name of the secret holding the private key (default `ssh-key`).
 * - `ssh_passphrase_secret`: name of the secret holding the key's passphrase (optional).
 * - `known_hosts_secret`: name of a secret holding known_hosts lines, or
 * - `host_key_fingerprint`: `SHA256:…` fingerprint(s) of the accepted host key, comma-separated
 *   when the hosts (or a jump host) have different keys. One of the two is required: host keys
 *   are always verified.
 * - `jump_host`: `host:port` of a bastion reached with the same user and key; its host key is
 *   checked the same way.
 * - `connect_timeout`: TCP connect + SSH handshake + auth limit (default 15s).
 */
export const paramsSchema = z
  .strictObject({
    transport: z.enum(["local", "ssh"]).default("ssh").describe("`local` (the manent worker's own filesystem) or `ssh`"),
    base: z
      .string()
      .min(1)
      .refine((v) => !v.split("/").includes(".."), {
        message: "must not contain '..'",
      })
      .transform((v) => (v.length > 1 ? v.replace(/\/+$/, "") : v))
      .describe(
        "Absolute directory on each target holding `releases/<version>` and the `current` symlink; `{host}` is replaced by the target's host, so several local targets get distinct directories. With transport `local` it may be relative, to the server's working directory",
      ),
    keep_releases: z
      .string()
      .default("5")
      .refine((v) => /^\d+$/.test(v), { message: "must be a whole number" })
      .transform(Number)
      .refine((n) => n >= 2, {
        message: "must be at least 2 (current and previous are always kept)",
      })
      .describe("How many releases each target keeps (at least 2); the current and the previous release are never deleted"),
    activate: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Shell command run with `sh -c` in the new release's directory once `current` points to it, with MANENT_VERSION, MANENT_ENVIRONMENT, MANENT_APPLICATION and MANENT_RELEASE_DIR set (with slots also MANENT_SLOT, MANENT_PORT, MANENT_BASE, MANENT_HOST); a non-zero exit fails the target. Re-run by a rollback",
      ),
    activate_timeout: duration.default(60_000).describe("Time limit of `activate`").meta({ type: "duration" }),
    user: z
      .string()
      .regex(/^[a-z_][a-z0-9_.-]*$/i, "must be a user name")
      .optional()
      .describe("SSH: the login user (required with transport ssh)"),
    ssh_key_secret: z.string().min(1).default("ssh-key").describe("SSH: the secret holding the private key"),
    ssh_passphrase_secret: z.string().min(1).optional().describe("SSH: the secret holding the key's passphrase"),
    known_hosts_secret: z
      .string()
      .min(1)
      .optional()
      .describe(
        "SSH: a secret holding known_hosts lines the host keys are checked against (this or `host_key_fingerprint` is required: host keys are always verified)",
      ),
    host_key_fingerprint: z
      .string()
      .transform((v) => v.split(/[\s,]+/).filter(Boolean))
      .refine((list) => list.length > 0 && list.every((f) => fingerprint.test(f)), {
        message: "must be one or more SHA256:<base64> fingerprints, comma-separated",
      })
      .optional()
      .describe(
        "SSH: `SHA256:…` fingerprints of the accepted host keys, comma-separated when the hosts (or a jump host) have different keys",
      ),
    jump_host: z
      .string()
      .regex(/^[^\s:]+:\d{1,5}$/, "must be host:port")
      .optional()
      .describe("SSH: `host:port` of a bastion reached with the same user and key; its host key is checked the same way"),
    connect_timeout: duration
      .default(15_000)
      .describe("SSH: limit of TCP connect, handshake and authentication")
      .meta({ type: "duration" }),
    slot_ports: slotPortsParam
      .optional()
      .describe(
        "Percentage rollouts: the two slots of each host and the port each serves, e.g. `blue=8081,green=8082` (a target label `slot_ports` overrides it)",
      ),
    deactivate: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Percentage rollouts: shell command that stops a slot (same environment as `activate`), run when a slot is retired or a candidate reverted, once HAProxy sends it no more connections",
      ),
    haproxy_socket: z
      .string()
      .refine((v) => parseRuntimeAddress(v) !== undefined, {
        message: "must be an absolute unix socket path or host:port",
      })
      .optional()
      .describe(
        "Percentage rollouts: HAProxy's runtime API (`stats socket … level admin`), a unix socket path on the manent worker or `host:port`",
      ),
    haproxy_backend: z
      .string()
      .regex(haproxyNamePattern, "must be an HAProxy backend name")
      .optional()
      .describe("Percentage rollouts: the HAProxy backend holding one server per host and slot (required with `haproxy_socket`)"),
    haproxy_server: z
      .string()
      .regex(/^[A-Za-z0-9_.:{}-]{1,100}$/, "must be a server name template such as {host}_{slot}")
      .default("{name}_{slot}")
      .describe(
        "Percentage rollouts: the servers' names in the backend, `{host}`, `{name}` (the target's name, else its host) and `{slot}` replaced",
      ),
    haproxy_tester_backend: z
      .string()
      .regex(haproxyNamePattern, "must be an HAProxy backend name")
      .optional()
      .describe(
        "Percentage rollouts: the backend testers' requests go to (chosen in haproxy.cfg by a header or cookie rule); manent keeps only the candidate's servers ready in it",
      ),
    haproxy_route_acl: z
      .string()
      .regex(/^\/[A-Za-z0-9_.\/-]{1,255}$/, "must be the absolute path of an ACL file haproxy.cfg loads (letters, digits, _.-/)")
      .refine((v) => !v.split("/").includes(".."), "must not contain ..")
      .optional()
      .describe(
        "Percentage rollouts (set_header_route): the ACL file haproxy.cfg loads with `acl … req.hdrs -m reg -f <file>` and sends to haproxy_tester_backend; manent sets its pattern through the runtime API",
      ),
    tester_header: z
      .string()
      .max(200)
      .optional()
      .describe("Percentage rollouts: how testers reach the candidate (e.g. `X-Canary: always`), reported as is"),
    drain_timeout: duration
      .default(60_000)
      .describe("Percentage rollouts: how long to wait for a slot's connections to end before stopping it")
      .meta({ type: "duration" }),
  })
  .superRefine((p, ctx) => {
    if (p.haproxy_socket && !p.haproxy_backend)
      ctx.addIssue({ code: "custom", path: ["haproxy_backend"], message: "is required with haproxy_socket" });
    if (p.haproxy_route_acl && !p.haproxy_tester_backend)
      ctx.addIssue({
        code: "custom",
        path: ["haproxy_tester_backend"],
        message: "is required with haproxy_route_acl (routed requests go to the tester backend)",
      });
    if ((p.haproxy_backend || p.haproxy_tester_backend) && !p.haproxy_socket)
      ctx.addIssue({ code: "custom", path: ["haproxy_socket"], message: "is required with haproxy_backend" });
    if (p.transport !== "ssh") return;
    if (!p.base.startsWith("/")) ctx.addIssue({ code: "custom", path: ["base"], message: "must be an absolute path with transport ssh" });
    if (!p.user)
      ctx.addIssue({
        code: "custom",
        path: ["user"],
        message: "is required with transport ssh",
      });
    if (!p.known_hosts_secret && !p.host_key_fingerprint) {
      ctx.addIssue({
        code: "custom",
        path: ["known_hosts_secret"],
        message: "known_hosts_secret or host_key_fingerprint is required with transport ssh (host keys are always verified)",
      });
    }
  });

/** The durations of {@link paramsSchema} are milliseconds once parsed. */
export type Params = z.output<typeof paramsSchema>;

/** Parses params; an invalid one is a permanent `invalid_argument` error naming the param. */
export function parseParams(raw: Record<string, string>): Params {
  const r = paramsSchema.safeParse(raw);
  // A relative base (transport local) is the server's, as its workdir is.
  if (r.success) return r.data.base.startsWith("/") ? r.data : { ...r.data, base: resolve(r.data.base) };
  // A misspelt param would otherwise be ignored and its default silently used.
  const unknown = r.error.issues.flatMap((i) => (i.code === "unrecognized_keys" ? i.keys : []));
  if (unknown.length > 0) {
    const known = Object.keys(paramsSchema.shape).join(", ");
    return invalid(`remote-copy: unknown param ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: ${known})`, unknown[0]!);
  }
  const problems = r.error.issues.map((i) => `param ${i.path.join(".") || "(params)"}: ${i.message}`);
  return invalid(`remote-copy: ${problems.join("; ")}`, r.error.issues[0]?.path.join(".") ?? "");
}

function invalid(message: string, param: string): never {
  throw new ManentError(Code.InvalidArgument, message, {
    details: { plugin: "remote-copy", param },
  });
}

/** A version becomes a directory name: it must be one safe path component. */
export function checkVersion(version: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._+-]*$/.test(version) || version.length > 200) {
    throw new ManentError(
      Code.InvalidArgument,
      `remote-copy: artifact version "${version}" cannot name a release directory (letters, digits, '.', '_', '+', '-')`,
      { details: { plugin: "remote-copy", field: "artifact.version" } },
    );
  }
}

/** The target's base dir, `{host}` and `{name}` (the target's identity) replaced. */
export function baseFor(params: Params, target: Pick<Target, "host" | "name">): string {
  return params.base.replaceAll("{host}", target.host).replaceAll("{name}", targetId(target));
}
