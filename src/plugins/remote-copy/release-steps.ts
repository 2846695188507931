import { basename } from "node:path";
import { Code, ManentError } from "../../core/errors.js";
import type { Logger } from "../../core/contract/index.js";
import {
  activateScript,
  EXIT_CHECKSUM_MISMATCH,
  EXIT_TIMEOUT,
  installScript,
  parseKeyValues,
  prepareScript,
  probeScript,
  pruneScript,
  removeCurrentScript,
  switchScript,
  uploadName,
  type ActivationEnv,
} from "./remote-scripts.js";
import { tail } from "./shell.js";
import type { Slots } from "./slot-params.js";
import type { ExecResult, Transport } from "./transport.js";

/** One target's view of the release layout under `base`, reached through a transport. */
export interface TargetSite {
  t: Transport;
  host: string;
  /** The target's identity (its envconfig name, else its host): the key of its results and slot state. */
  name: string;
  base: string;
  log: Logger;
  /** The host's two slots when slots are on (param or label slot_ports). */
  slots?: Slots | undefined;
}

/**
 * How errors name a site: the target's envconfig name with its host, because several targets can
 * share one host and an error naming only the host would not say which of them failed.
 */
export function siteLabel(site: Pick<TargetSite, "host" | "name">): string {
  return site.name === site.host ? site.host : `${site.name} (${site.host})`;
}

export interface Probe {
  /** The version `current` points to; "" when there is none. */
  current: string;
  /** Whether `releases/<version>` (the version asked about) exists, hence is complete. */
  exists: boolean;
}

export async function probe(site: TargetSite, version: string): Promise<Probe> {
  const r = await run(site, probeScript(site.base, version), "reading current");
  const kv = parseKeyValues(r.stdout);
  const link = kv.get("current")?.[0] ?? "";
  return {
    current: link === "" ? "" : basename(link),
    exists: kv.get("exists")?.[0] === "1",
  };
}

/** Creates the layout; refuses (permanently) an unwritable base or one without room for `bytes`. */
export async function prepare(site: TargetSite, bytes: number): Promise<void> {
  const r = await site.t.exec(prepareScript(site.base));
  if (r.code !== 0) throw remoteFailure(site, site.base, "cannot create the release layout", r);
  const availKb = Number(parseKeyValues(r.stdout).get("avail_kb")?.[0] ?? NaN);
  if (Number.isFinite(availKb) && availKb * 1024 < bytes) {
    throw diskFull(site, site.base, `${bytes} bytes to upload, ${availKb * 1024} available`);
  }
}

/** Uploads the artifact into `.incoming`; a full disk or a permission problem is permanent. */
export async function upload(site: TargetSite, localPath: string, version: string, fileName: string): Promise<number> {
  const remote = `${site.base}/${uploadName(version, fileName)}`;
  site.log.info("upload started", { host: site.host, path: remote });
  let nextReport = 0;
  try {
    return await site.t.upload(localPath, remote, (sent, total) => {
      // A progress line per ~10%: enough to see a transfer move without flooding the log.
      if (sent < nextReport) return;
      nextReport = sent + Math.max(1, Math.floor(total / 10));
      site.log.debug("upload progress", { host: site.host, sent, total });
    });
  } catch (err) {
    const e = ManentError.from(err);
    if (e.code === Code.ResourceExhausted) throw diskFull(site, remote, e.message);
    if (e.code === Code.PermissionDenied) throw permanentAt(site, remote, "permission denied", e);
    if (e.code === Code.Internal && (await isFull(site))) throw diskFull(site, remote, e.message);
    throw e;
  }
}

/** Verifies the sha256 on the host and installs `releases/<version>`. */
export async function install(site: TargetSite, version: string, fileName: string, sha256: string, unpack: boolean): Promise<void> {
  const r = await site.t.exec(installScript(site.base, version, fileName, sha256, unpack));
  if (r.code === 0) return;
  if (r.code === EXIT_CHECKSUM_MISMATCH) {
    // Bytes changed on the way: a new upload may well succeed, so not permanent.
    throw new ManentError(Code.DataLoss, `${siteLabel(site)}: uploaded artifact does not match sha256 ${sha256} (${tail(r.stderr, 1)})`, {
      details: { host: site.host },
    });
  }
  throw remoteFailure(site, `${site.base}/releases/${version}`, "cannot install the release", r);
}

export async function switchCurrent(site: TargetSite, version: string): Promise<void> {
  const r = await site.t.exec(switchScript(site.base, version));
  if (r.code !== 0) throw remoteFailure(site, `${site.base}/current`, "cannot switch current", r);
}

export async function removeCurrent(site: TargetSite): Promise<void> {
  const r = await site.t.exec(removeCurrentScript(site.base));
  if (r.code !== 0) throw remoteFailure(site, `${site.base}/current`, "cannot remove current", r);
}

/**
 * Runs the activate command. A failure is permanent: re-running the deploy would find the
 * version already current and skip activation, so only a rollback is a sound answer.
 */
export async function activate(
  site: TargetSite,
  command: string,
  env: ActivationEnv,
  timeoutMs: number,
  what: "activate" | "deactivate" = "activate",
): Promise<void> {
  site.log.info(what, {
    host: site.host,
    version: env.MANENT_VERSION,
    ...(env.MANENT_SLOT ? { slot: env.MANENT_SLOT } : {}),
  });
  // The host's `timeout` kills the command; the client-side limit only guards a stuck channel.
  const r = await site.t.exec(activateScript(command, env, timeoutMs), {
    timeoutMs: timeoutMs + 15_000,
  });
  if (r.code === 0) return;
  const how =
    r.code === EXIT_TIMEOUT
      ? `timed out after ${timeoutMs} ms (exit code ${EXIT_TIMEOUT})`
      : r.code === null
        ? `was killed by signal ${r.signal ?? "?"}`
        : `failed with exit code ${r.code}`;
  const stderr = tail(r.stderr);
  throw new ManentError(
    Code.Aborted,
    `${siteLabel(site)}: ${what} of release ${env.MANENT_VERSION}${env.MANENT_SLOT ? ` in slot ${env.MANENT_SLOT}` : ""} ${how}${stderr ? `; stderr: ${stderr}` : "; no stderr"}`,
    {
      details: { host: site.host, exit_code: String(r.code ?? r.signal ?? "") },
    },
  );
}

/** Deletes old releases; a failure here only costs disk space, so it is logged, not raised. */
export async function prune(site: TargetSite, keep: number, current: string, previous: string): Promise<string[]> {
  try {
    const r = await site.t.exec(pruneScript(site.base, keep, current, previous));
    if (r.code !== 0)
      site.log.warn("pruning old releases failed", {
        host: site.host,
        stderr: tail(r.stderr),
      });
    return r.stdout.split("\n").filter(Boolean);
  } catch (err) {
    site.log.warn("pruning old releases failed", {
      host: site.host,
      error: ManentError.from(err).message,
    });
    return [];
  }
}

async function run(site: TargetSite, script: string, doing: string): Promise<ExecResult> {
  const r = await site.t.exec(script);
  if (r.code !== 0) throw remoteFailure(site, site.base, doing, r);
  return r;
}

/** Classifies a failed script from its stderr: full disk and permissions are permanent. */
function remoteFailure(site: TargetSite, path: string, doing: string, r: ExecResult): ManentError {
  const stderr = tail(r.stderr, 5);
  if (/No space left on device|Disk quota exceeded/i.test(r.stderr)) return diskFull(site, path, stderr);
  if (/Permission denied|Read-only file system|Operation not permitted/i.test(r.stderr)) {
    return permanentAt(site, path, `${doing}: ${stderr}`);
  }
  return new ManentError(Code.Internal, `${siteLabel(site)}: ${doing} in ${path} (exit code ${r.code}): ${stderr}`, {
    details: { host: site.host, path },
  });
}

async function isFull(site: TargetSite): Promise<boolean> {
  const r = await site.t.exec(prepareScript(site.base)).catch(() => undefined);
  if (!r) return false;
  if (/No space left on device/i.test(r.stderr)) return true;
  const availKb = Number(parseKeyValues(r.stdout).get("avail_kb")?.[0] ?? NaN);
  return Number.isFinite(availKb) && availKb < 64;
}

function diskFull(site: TargetSite, path: string, why: string): ManentError {
  return new ManentError(Code.Aborted, `${siteLabel(site)}: no space left on device for ${path} (${why}); current left untouched`, {
    details: { host: site.host, path },
  });
}

function permanentAt(site: TargetSite, path: string, why: string, cause?: unknown): ManentError {
  return new ManentError(Code.Aborted, `${siteLabel(site)}: ${path} is not writable (${why}); current left untouched`, {
    ...(cause !== undefined ? { cause } : {}),
    details: { host: site.host, path },
  });
}
