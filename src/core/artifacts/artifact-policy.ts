import { closeSync, constants, fstatSync, openSync, realpathSync } from "node:fs";
import { isIP } from "node:net";
import { join, relative, resolve, sep, isAbsolute } from "node:path";
import type { ArtifactsConfig } from "../config/index.js";
import { Code, ManentError } from "../errors.js";
import { AddressRules } from "./address-rules.js";
import { bad, clip } from "./artifact-source.js";
import type { CheckedHost, Network, Outbound, Resolver } from "./network.js";

export interface PolicyOptions {
  artifacts: ArtifactsConfig;
  /** Relative `allowed_paths` resolve against it. */
  baseDir: string;
  /** Never readable as an artifact, even under an allowed path: it holds the server's own state. */
  workdirPath: string;
  /** How names resolve (the network's lookup; a test's own). */
  lookup: Resolver;
}

/**
 * The rules of manent.yml's `artifacts` section, applied to every caller alike: which server
 * paths and which URLs a deploy may name. Every refusal is `invalid_argument` on `artifact.source`.
 */
export class ArtifactPolicy {
  private readonly roots: string[];
  private readonly workdir: string;
  /** Parsed at the first address checked: a server path's check (two per deploy of one) needs none of it. */
  private addressRules?: AddressRules;

  constructor(private readonly o: PolicyOptions) {
    this.roots = o.artifacts.allowed_paths.map((p) => resolve(o.baseDir, p));
    this.workdir = resolve(o.baseDir, o.workdirPath);
  }

  /**
   * Opens a server file for reading after checking that it lies under an allowed directory once
   * every link is resolved, and that the opened file is the checked one. Nothing is read before the
   * checks pass, and a refusal says nothing about a file outside the allowed directories. The file
   * descriptor returned is the caller's to close.
   *
   * The checks and the open are synchronous system calls: each takes microseconds, where each of
   * them through the thread pool cost about ten times the CPU (every deploy opens its path twice,
   * at submission and at its fetch). What is read from the file is read asynchronously.
   */
  async openPath(path: string): Promise<{ fd: number; size: number }> {
    if (this.roots.length === 0) {
      throw bad(
        "server-side paths are not allowed (artifacts.allowed_paths in manent.yml lists none); deploy a local file with the manent CLI, which uploads it",
      );
    }
    const lexical = resolve(path);
    if (!this.roots.some((r) => isUnder(lexical, r)) || isUnder(lexical, this.workdir)) throw this.outside(path);
    const real = realpathOrUndefined(lexical);
    if (real === undefined) throw bad(`${clip(path)} does not exist`);
    // The roots' and the workdir's real paths, resolved once for both checks below: a root
    // replaced between the two is no different from one replaced just after the second, and the
    // second judges the file opened, wherever the links led.
    const realDirs = this.realDirs();
    if (!underRealRoot(real, realDirs)) throw this.outside(path);
    let fd: number;
    try {
      fd = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      throw bad(`${clip(path)} cannot be opened`);
    }
    try {
      // A link swapped in between the check and the open is caught here: judge the file opened.
      const opened = realpathOrUndefined(`/proc/self/fd/${fd}`) ?? real;
      if (!underRealRoot(opened, realDirs)) throw this.outside(path);
      const info = fstatSync(fd);
      if (!info.isFile()) throw bad(`${clip(path)} is not a regular file`);
      return { fd, size: info.size };
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /** Checks a URL against `allowed_urls`, then the addresses its host resolves to; returns the address to connect to. */
  async checkUrl(url: URL): Promise<CheckedHost> {
    if (url.protocol !== "http:" && url.protocol !== "https:") throw bad(`${clip(url.href)}: only http and https are fetched`);
    if (!this.o.artifacts.allowed_urls.some((prefix) => urlMatches(prefix, url))) {
      throw bad(
        this.o.artifacts.allowed_urls.length === 0
          ? `${clip(url.href)}: the server fetches no URL (artifacts.allowed_urls in manent.yml lists none); deploy a local file with the manent CLI, which uploads it`
          : `${clip(url.href)} is not under an allowed URL (artifacts.allowed_urls in manent.yml)`,
      );
    }
    return this.checkHost(url.hostname);
  }

  /** Every address a name resolves to must pass the address rules: one refused address refuses the name. */
  async checkHost(hostname: string, field = "artifact.source"): Promise<CheckedHost> {
    const bad = (message: string) => new ManentError(Code.InvalidArgument, `${field}: ${message}`, { details: { field } });
    const host = hostname.replace(/^\[|\]$/g, "");
    let found: { address: string; family: number }[];
    if (isIP(host)) found = [{ address: host, family: isIP(host) }];
    else {
      try {
        found = await this.o.lookup(host);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOTFOUND" || code === "ENODATA") throw bad(`host ${clip(host)} does not resolve`);
        throw new ManentError(Code.Unavailable, `${field}: cannot resolve ${clip(host)}: ${code ?? (err as Error).message}`, {
          cause: err,
        });
      }
    }
    if (found.length === 0) throw bad(`host ${clip(host)} does not resolve`);
    for (const { address } of found) {
      const why = (this.addressRules ??= new AddressRules(this.o.artifacts.allowed_networks)).refusal(address);
      if (why)
        throw bad(
          `host ${clip(host)} is ${why} (${address}); the server fetches from it only when artifacts.allowed_networks in manent.yml holds it`,
        );
    }
    const first = found[0]!;
    return { address: first.address, family: first.family === 6 ? 6 : 4 };
  }

  /** A tenant's URLs as the core reaches them: these rules, then `network`'s request to the address they checked. */
  outbound(network: Pick<Network, "request">): Outbound {
    return { check: (url, field) => this.checkHost(url.hostname, field), request: network.request };
  }

  /** The workdir's real path (itself when it cannot be resolved) and the allowed roots' that exist, as they are now. */
  private realDirs(): RealDirs {
    const roots = this.roots.map(realpathOrUndefined).filter((r): r is string => r !== undefined);
    return { workdir: realpathOrUndefined(this.workdir) ?? this.workdir, roots };
  }

  private outside(path: string): ManentError {
    return bad(`${clip(path)} is not under a directory the server allows (artifacts.allowed_paths in manent.yml)`);
  }
}

interface RealDirs {
  workdir: string;
  roots: string[];
}

/** A real path lies under an allowed root's real path, and not in the workdir's. */
function underRealRoot(real: string, dirs: RealDirs): boolean {
  return !isUnder(real, dirs.workdir) && dirs.roots.some((r) => isUnder(real, r));
}

/** A path with every link resolved (realpath(3)), or undefined when it does not resolve. */
function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync.native(path);
  } catch {
    return undefined;
  }
}

function isUnder(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/**
 * An `allowed_urls` entry matches a URL of the same scheme, host and port (":*" for any port)
 * whose path starts with the entry's path at a segment boundary.
 */
export function urlMatches(prefix: string, url: URL): boolean {
  const anyPort = /:\*(?=\/|$)/.test(prefix);
  const p = new URL(prefix.replace(/:\*(?=\/|$)/, ""));
  if (p.protocol !== url.protocol || p.hostname !== url.hostname) return false;
  if (!anyPort && p.port !== url.port) return false;
  const base = p.pathname.endsWith("/") ? p.pathname : `${p.pathname}/`;
  return url.pathname === p.pathname || url.pathname.startsWith(base);
}
