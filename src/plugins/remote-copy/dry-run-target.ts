import { TargetStatus, type TargetOutcome } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import type { ArtifactFile } from "./artifact-file.js";
import * as steps from "./release-steps.js";
import { siteLabel, type TargetSite } from "./release-steps.js";
import { dryRunScript, parseKeyValues } from "./remote-scripts.js";
import type { CallContext } from "./site.js";

/**
 * Checks one target as the deploy would meet it (host key, login, current release, a writable
 * base, room for the upload, the commands used) and changes nothing.
 */
export async function dryRunTarget(call: CallContext, site: TargetSite, file: ArtifactFile): Promise<TargetOutcome> {
  const version = call.req.artifact.version;
  const before = await steps.probe(site, version);
  const r = await site.t.exec(dryRunScript(site.base, call.params.activate !== undefined));
  const kv = parseKeyValues(r.stdout);
  const checked = kv.get("checked")?.[0] ?? site.base;
  const missing = kv.get("missing") ?? [];
  const details: Record<string, string> = {
    release_path: `${site.base}/releases/${version}`,
    previous_version: before.current,
    bytes_to_send: before.exists ? "0" : String(file.size),
  };
  if (before.current === version && before.exists) return { status: TargetStatus.Unchanged, details };
  if (missing.length > 0) {
    throw new ManentError(Code.FailedPrecondition, `${siteLabel(site)}: missing commands on the host: ${missing.join(", ")}`, {
      details: { host: site.host },
    });
  }
  if (kv.get("writable")?.[0] !== "1") {
    throw new ManentError(Code.Aborted, `${siteLabel(site)}: ${checked} is not writable by the deploy user (base ${site.base})`, {
      details: { host: site.host, path: checked },
    });
  }
  const availKb = Number(kv.get("avail_kb")?.[0] ?? NaN);
  if (!before.exists && Number.isFinite(availKb) && availKb * 1024 < file.size) {
    throw new ManentError(
      Code.Aborted,
      `${siteLabel(site)}: no space left on device for ${checked}: ${file.size} bytes needed, ${availKb * 1024} available`,
      { details: { host: site.host, path: checked } },
    );
  }
  return { status: TargetStatus.Ready, details };
}
