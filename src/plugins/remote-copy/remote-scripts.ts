import { sq } from "./shell.js";

/**
 * The shell scripts run on a target, kept to POSIX sh plus GNU coreutils/tar (`mv -T`,
 * `sha256sum`, `timeout`), which Debian/Ubuntu/RHEL hosts have. Every value is quoted with
 * {@link sq}; paths are relative to `base` after `cd` so a `{host}` in base cannot break quoting.
 */

/** Exit status of {@link installScript} when the uploaded bytes do not hash to the artifact's sha256. */
export const EXIT_CHECKSUM_MISMATCH = 65;
/** Exit status of GNU `timeout` when the command ran out of time. */
export const EXIT_TIMEOUT = 124;

export const incomingDir = ".incoming";
/** `<base>/.checksums/<version>`: the sha256 of every file of a release, written as it is installed (drift compares with it). */
export const checksumsDir = ".checksums";

export function uploadName(version: string, fileName: string): string {
  return `${incomingDir}/${version}--${fileName}.part`;
}

/** Prints `current=<link target>` and `exists=0|1` for the release dir; an absent base is no release. */
export function probeScript(base: string, version: string): string {
  return [
    `cd ${sq(base)} 2>/dev/null || { echo current=; echo exists=0; exit 0; }`,
    `printf 'current=%s\\n' "$(readlink current 2>/dev/null)"`,
    `if [ -d ${sq(`releases/${version}`)} ]; then echo exists=1; else echo exists=0; fi`,
  ].join("\n");
}

/** Creates the layout and prints the free space (KiB) where the upload lands. */
export function prepareScript(base: string): string {
  return [
    "set -e",
    `mkdir -p ${sq(`${base}/releases`)} ${sq(`${base}/${incomingDir}`)}`,
    `cd ${sq(base)}`,
    // Probe writability with a real file: `test -w` says yes to root on a read-only mount.
    `probe=${incomingDir}/.write-test.$$`,
    `: > "$probe" && rm -f "$probe"`,
    `df -Pk ${incomingDir} | awk 'NR==2 { print "avail_kb=" $4 }'`,
  ].join("\n");
}

/**
 * Verifies the upload's sha256, unpacks it into a staging dir and renames that to
 * `releases/<version>`: a release dir that exists is always complete. Any failure removes the
 * staging dir and the upload.
 */
export function installScript(base: string, version: string, fileName: string, sha256: string, unpack: boolean): string {
  const upload = uploadName(version, fileName);
  const staging = `releases/.staging-${version}`;
  return [
    `cd ${sq(base)} || exit 1`,
    `fail() { rc=$?; rm -rf ${sq(staging)} ${sq(upload)}; exit "\${1:-$rc}"; }`,
    `sum=$(sha256sum ${sq(upload)} | cut -d' ' -f1) || fail`,
    `if [ "$sum" != ${sq(sha256)} ]; then echo "sha256 on host is $sum" >&2; fail ${EXIT_CHECKSUM_MISMATCH}; fi`,
    `rm -rf ${sq(staging)} && mkdir ${sq(staging)} || fail`,
    unpack
      ? `tar -xzf ${sq(upload)} -C ${sq(staging)} --no-same-owner || fail`
      : `mv ${sq(upload)} ${sq(`${staging}/${fileName}`)} || fail`,
    // What each file's bytes were at install, so drift can tell a file changed on the host afterwards.
    `mkdir -p ${checksumsDir} || fail`,
    `(cd ${sq(staging)} && find . -type f -exec sha256sum {} + | LC_ALL=C sort -k 2) > ${sq(`${checksumsDir}/.tmp-${version}`)} || fail`,
    `mv -f ${sq(`${checksumsDir}/.tmp-${version}`)} ${sq(`${checksumsDir}/${version}`)} || fail`,
    // A release dir that exists is one whose files changed after install (see deployTarget): put aside, replaced, removed.
    `if [ -d ${sq(`releases/${version}`)} ]; then mv -T ${sq(`releases/${version}`)} ${sq(`releases/.replaced-${version}`)} || fail; fi`,
    `mv -T ${sq(staging)} ${sq(`releases/${version}`)} || fail`,
    `rm -rf ${sq(`releases/.replaced-${version}`)}`,
    `rm -f ${sq(upload)}`,
  ].join("\n");
}

/**
 * Points `current` at the release: a new symlink under a temporary name renamed over `current`
 * (rename(2) is atomic, so `current` never disappears). The release dir's mtime is bumped, as
 * pruning orders releases by it.
 */
export function switchScript(base: string, version: string): string {
  return [
    "set -e",
    `cd ${sq(base)}`,
    `touch ${sq(`releases/${version}`)}`,
    `ln -sfn ${sq(`releases/${version}`)} .current.tmp.$$`,
    `mv -T .current.tmp.$$ current`,
  ].join("\n");
}

/** Removes `current` (a rollback to "nothing was deployed"). */
export function removeCurrentScript(base: string): string {
  return `cd ${sq(base)} && rm -f current`;
}

export interface ActivationEnv {
  MANENT_VERSION: string;
  MANENT_ENVIRONMENT: string;
  MANENT_APPLICATION: string;
  MANENT_RELEASE_DIR: string;
  /** With slots (param slot_ports): the slot the release runs in, its port, the base dir and the target's host. */
  MANENT_SLOT?: string;
  MANENT_PORT?: string;
  MANENT_BASE?: string;
  MANENT_HOST?: string;
}

/** Runs the activate command in the release dir, killed by `timeout` when it overruns. */
export function activateScript(command: string, env: ActivationEnv, timeoutMs: number): string {
  const vars = Object.entries(env)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${k}=${sq(v)}`)
    .join(" ");
  const seconds = Math.max(1, Math.ceil(timeoutMs / 1000));
  return [
    `cd ${sq(env.MANENT_RELEASE_DIR)} || exit 1`,
    `export ${vars}`,
    // stdin from /dev/null: a command waiting for input would otherwise hang until the timeout.
    `exec timeout -k 5 ${seconds} sh -c ${sq(command)} </dev/null`,
  ].join("\n");
}

/**
 * Deletes the oldest releases beyond `keep`, never `current` nor `previous`, and leftover
 * uploads; prints the deleted release names.
 */
export function pruneScript(base: string, keep: number, current: string, previous: string): string {
  return [
    `cd ${sq(base)} || exit 0`,
    `rm -f ${incomingDir}/*.part`,
    "cd releases || exit 0",
    "n=0",
    "ls -1t | while IFS= read -r r; do",
    "  n=$((n + 1))",
    `  if [ "$n" -le ${keep} ] || [ "$r" = ${sq(current)} ] || [ "$r" = ${sq(previous)} ]; then continue; fi`,
    `  rm -rf -- "$r" && rm -f -- "../${checksumsDir}/$r" && echo "$r"`,
    "done",
  ].join("\n");
}

/**
 * Reads, changing nothing, what `current` points to and compares the files of that release (or of
 * `releases/<version>`) with the
 * checksums recorded at its install: prints `current=`, `manifest=0|1`, then `changed=<expected> <live> <path>`,
 * `missing=<path>` and `added=<path>` lines (paths relative to the release, `./`-prefixed).
 */
export function driftScript(base: string, version?: string): string {
  return [
    `cd ${sq(base)} 2>/dev/null || { echo current=; exit 0; }`,
    `link=$(readlink current 2>/dev/null)`,
    `printf 'current=%s\\n' "$link"`,
    // With a version: that release's files, whatever current is (a deploy checking the release it would switch to).
    version === undefined ? `[ -n "$link" ] || exit 0` : `link=${sq(`releases/${version}`)}`,
    `v=\${link##*/}`,
    `m="$PWD/${checksumsDir}/$v"`,
    `[ -f "$m" ] || { echo manifest=0; exit 0; }`,
    `echo manifest=1`,
    `cd "releases/$v" 2>/dev/null || { echo release=0; exit 0; }`,
    `export LC_ALL=C`,
    `t=$(mktemp) || exit 1`,
    `trap 'rm -f "$t"' EXIT`,
    `sha256sum -c "$m" 2>/dev/null | while IFS= read -r line; do`,
    `  case "$line" in`,
    `    *": OK") ;;`,
    `    *": FAILED open or read") printf 'missing=%s\\n' "\${line%: FAILED open or read}" ;;`,
    `    *": FAILED") f=\${line%: FAILED}`,
    `      want=$(awk -v f="$f" 'substr($0, 67) == f { print substr($0, 1, 64) }' "$m")`,
    `      printf 'changed=%s %s %s\\n' "$want" "$(sha256sum "$f" | cut -d' ' -f1)" "$f" ;;`,
    `  esac`,
    `done`,
    `cut -c 67- "$m" | sort > "$t"`,
    `find . -type f | sort | comm -13 "$t" - | sed 's/^/added=/'`,
  ].join("\n");
}

/** Checks, without changing anything, that a deploy could write under base and has its tools. */
export function dryRunScript(base: string, needTimeout: boolean): string {
  const tools = needTimeout ? "tar sha256sum timeout" : "tar sha256sum";
  return [
    `p=${sq(base)}`,
    `while [ ! -e "$p" ]; do p=$(dirname "$p"); done`,
    `printf 'checked=%s\\n' "$p"`,
    `if [ -d "$p" ] && [ -w "$p" ] && [ -x "$p" ]; then echo writable=1; else echo writable=0; fi`,
    `df -Pk "$p" | awk 'NR==2 { print "avail_kb=" $4 }'`,
    `for c in ${tools}; do command -v "$c" >/dev/null 2>&1 || echo "missing=$c"; done`,
  ].join("\n");
}

/** Parses `key=value` lines printed by the scripts above. */
export function parseKeyValues(stdout: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of stdout.split("\n")) {
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)]);
  }
  return out;
}
