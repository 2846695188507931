import { DriftStatus, type DriftChange, type TargetDrift } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { siteLabel, type TargetSite } from "./release-steps.js";
import { checksumsDir, driftScript, parseKeyValues } from "./remote-scripts.js";
import { tail } from "./shell.js";
import type { ExecResult } from "./transport.js";

/**
 * What runs on one target against the release manent recorded (`expected`): `current` must point
 * at it, and the files of the live release must still have the sha256 they had at install.
 */
export async function driftOf(site: TargetSite, expected: string): Promise<Omit<TargetDrift, "host">> {
  const r = await site.t.exec(driftScript(site.base));
  return parseDrift(site, expected, r);
}

/**
 * Whether `releases/<version>`'s files still have their install-time sha256 (true when no checksums
 * were recorded: a release from before they were). A deploy reinstalls a release that is not.
 */
export async function releaseIntact(site: TargetSite, version: string): Promise<boolean> {
  const r = await site.t.exec(driftScript(site.base, version));
  const kv = parseKeyValues(r.stdout);
  if (r.code !== 0) return true; // not decidable here: the deploy goes on as before checksums existed
  return !kv.has("changed") && !kv.has("missing") && !kv.has("added") && kv.get("release")?.[0] !== "0";
}

function parseDrift(site: TargetSite, expected: string, r: ExecResult): Omit<TargetDrift, "host"> {
  if (r.code !== 0) {
    throw new ManentError(Code.Internal, `${siteLabel(site)}: reading ${site.base} for drift (exit code ${r.code}): ${tail(r.stderr, 5)}`, {
      details: { host: site.host, path: site.base },
    });
  }
  const kv = parseKeyValues(r.stdout);
  const link = kv.get("current")?.[0] ?? "";
  const live = link === "" ? "" : (link.split("/").at(-1) ?? "");
  const changes: DriftChange[] = [];
  if (live !== expected) changes.push({ object: "current", field: "version", expected, live });
  const path = (p: string): string => p.replace(/^\.\//, "");
  for (const line of kv.get("changed") ?? []) {
    const [want = "", got = "", ...rest] = line.split(" ");
    changes.push({ object: path(rest.join(" ")), field: "sha256", expected: want, live: got });
  }
  for (const p of kv.get("missing") ?? []) changes.push({ object: path(p), field: "", expected: "present", live: "" });
  for (const p of kv.get("added") ?? []) changes.push({ object: path(p), field: "", expected: "", live: "present" });
  const details: Record<string, string> = { base: site.base };
  if (live !== "") details.release_path = `${site.base}/releases/${live}`;
  if (changes.length > 0) return { status: DriftStatus.Drifted, version: live, changes, details };
  if (live !== "" && kv.get("manifest")?.[0] === "0") {
    // Installed by a remote-copy from before checksums were recorded: its files cannot be compared.
    details.reason = `no checksums recorded for release ${live} (${site.base}/${checksumsDir}/${live}): it was installed before manent recorded them; the next deploy records them`;
    return { status: DriftStatus.Unknown, version: live, changes, details };
  }
  if (kv.get("release")?.[0] === "0") {
    return {
      status: DriftStatus.Drifted,
      version: live,
      changes: [{ object: `releases/${live}`, field: "", expected: "present", live: "" }],
      details,
    };
  }
  return { status: DriftStatus.InSync, version: live, changes, details };
}
