import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { Code, ManentError } from "../core/errors.js";
import type { GitEnvconfigFile, GitEnvconfigSource, GitProviderSpec } from "../core/config/index.js";
import { readSecretRef } from "../core/config/index.js";

type Spec = GitProviderSpec["git"];

interface TreeEntry {
  mode: string;
  oid: string;
  size: number;
}

/** The outcome of one refresh, as the API reports it. */
export interface GitRefreshResult {
  provider: string;
  before?: string;
  after?: string;
  error?: string;
}

/** The URL without userinfo (user:token@), for messages and the recorded origin. */
export function scrubUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/)[^/@]*@/i, "$1");
}

const commitPattern = /^[0-9a-f]{40}$/;
// The name under which the last good commit is kept: updated atomically (update-ref) only after every check passed,
// so a server killed during a fetch restarts on the previous good commit and never on a half-fetched one.
const goodRef = "refs/manent/good";
/** What a pack may hold beyond its commit's files (headers, the commit and trees), received before a fetch is stopped. */
const packSlack = 1024 * 1024;
/** How much history the force-push check may fetch, in multiples of git.max_checkout_size. */
const historyFactor = 4;
/** The most envconfig text (UTF-16 code units) a repository keeps read. */
const blobCacheBytes = 32 * 1024 * 1024;

/**
 * One git envconfig provider's repository, fetched with the real git CLI into a bare repository under
 * the workdir (no work tree: nothing is checked out, files are read with cat-file at one commit).
 */
export class GitEnvconfigRepository implements GitEnvconfigSource {
  readonly dir: string;
  private commit: string | undefined;
  private tree: Map<string, TreeEntry> | undefined;
  private inflight: Promise<GitRefreshResult> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastError: string | undefined;
  private refreshed: (() => Promise<unknown>) | undefined;
  private readonly blobs = new Map<string, string>();
  private blobBytes = 0;

  constructor(
    readonly name: string,
    private readonly spec: Spec,
    workdirPath: string,
    private readonly log: (message: string) => void = () => undefined,
  ) {
    this.dir = join(workdirPath, "envconfig-git", createHash("sha256").update(spec.repository).digest("hex").slice(0, 16));
  }

  /** Opens (or creates) the bare repository, recovers the last good commit and fetches once. */
  async start(): Promise<GitRefreshResult> {
    // What the configuration names is read first: a secret or CA file that is not there is a
    // configuration error that stops the start (exit 2), not a failed fetch to be logged.
    if (this.spec.token) await readSecretRef(`envconfig provider ${this.name}: git.token`, this.spec.token);
    if (this.spec.ssh_key) await readSecretRef(`envconfig provider ${this.name}: git.ssh_key`, this.spec.ssh_key);
    if (this.spec.ca_file) {
      await readFile(resolve(this.spec.ca_file)).catch((err: NodeJS.ErrnoException) => {
        throw new ManentError(
          Code.InvalidArgument,
          `envconfig provider ${this.name}: git.ca_file: cannot read ${this.spec.ca_file}: ${err.code ?? err.message}`,
          {
            details: { field: "git.ca_file" },
          },
        );
      });
    }
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await this.git(["init", "--bare", "--quiet"]);
    // What a fetch killed with its server left (a lock, a half-received pack) would stop every later one.
    await this.removeLeftovers();
    const good = await this.git(["rev-parse", "--verify", "--quiet", `${goodRef}^{commit}`]).catch(() => "");
    if (commitPattern.test(good.trim())) await this.use(good.trim());
    const result = await this.refresh();
    this.timer = setInterval(() => void this.refresh().then(() => this.refreshed?.()), this.spec.interval);
    this.timer.unref();
    return result;
  }

  /** Runs `listener` after each refresh on the interval (a refresh asked for runs its own follow-up). */
  onRefreshed(listener: () => Promise<unknown>): void {
    this.refreshed = listener;
  }

  stop(): void {
    clearInterval(this.timer);
    this.refreshed = undefined;
  }

  get current(): string | undefined {
    return this.commit;
  }

  get error(): string | undefined {
    return this.lastError;
  }

  /** Fetches the ref; a fetch asked for while one runs joins it. A failure keeps the last good commit. */
  refresh(): Promise<GitRefreshResult> {
    this.inflight ??= this.fetchOnce().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  async read(path: string): Promise<GitEnvconfigFile | undefined> {
    const commit = this.commit;
    const tree = this.tree;
    if (!commit || !tree) {
      throw new ManentError(
        Code.Unavailable,
        `envconfig provider ${this.name}: ${scrubUrl(this.spec.repository)} has not been fetched yet${this.lastError ? `: ${this.lastError}` : ""}`,
      );
    }
    const parts = path.split("/");
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join("/");
      const entry = tree.get(prefix);
      if (!entry) return undefined;
      if (entry.mode === "120000") throw this.hostile(path, prefix, "is a symbolic link");
      if (entry.mode === "160000") throw this.hostile(path, prefix, "is a submodule");
      if (i === parts.length) {
        if (entry.mode === "040000") throw this.hostile(path, prefix, "is a directory");
        if (entry.size > this.spec.max_file_size) {
          throw this.hostile(path, prefix, `is ${entry.size} bytes, more than git.max_file_size (${this.spec.max_file_size})`);
        }
        const text = await this.blob(entry.oid);
        return { text, commit, repository: scrubUrl(this.spec.repository), ref: this.spec.ref };
      }
    }
    return undefined;
  }

  /**
   * A blob's text, kept by its id (which names its content): every deploy and each overview reads
   * its envconfig, and one git process per read would be most of the cost. Bounded in bytes.
   */
  private async blob(oid: string): Promise<string> {
    const kept = this.blobs.get(oid);
    if (kept !== undefined) return kept;
    const text = await this.git(["cat-file", "blob", oid], this.spec.max_file_size);
    if (this.blobBytes + text.length > blobCacheBytes) {
      this.blobs.clear();
      this.blobBytes = 0;
    }
    this.blobs.set(oid, text);
    this.blobBytes += text.length;
    return text;
  }

  private hostile(file: string, field: string, reason: string): ManentError {
    return new ManentError(Code.InvalidArgument, `envconfig provider ${this.name}: ${file}: ${field} ${reason} (at ${this.commit})`, {
      details: { file, field },
    });
  }

  private async fetchOnce(): Promise<GitRefreshResult> {
    const before = this.commit;
    try {
      const after = await this.fetchAndCheck(before);
      this.lastError = undefined;
      return { provider: this.name, before, after };
    } catch (err) {
      const message = this.scrub(err instanceof Error ? err.message : String(err));
      this.lastError = message;
      this.log(
        `envconfig provider ${this.name}: refresh of ${scrubUrl(this.spec.repository)} failed, keeping ${before ?? "no commit"}: ${message}`,
      );
      return { provider: this.name, before, after: before, error: message };
    }
  }

  private async fetchAndCheck(before: string | undefined): Promise<string> {
    await this.git(
      ["fetch", "--quiet", "--depth=1", "--no-tags", "--no-recurse-submodules", "--", this.spec.repository, this.spec.ref],
      undefined,
      true,
      this.spec.max_checkout_size + packSlack,
    );
    const fetched = (await this.git(["rev-parse", "--verify", "FETCH_HEAD^{commit}"])).trim();
    if (before && fetched !== before) {
      const pinned = commitPattern.test(this.spec.ref) || (await this.isTag());
      if (pinned)
        throw new ManentError(
          Code.FailedPrecondition,
          `git.ref ${this.spec.ref} is pinned but now names ${fetched}, not ${before}: refused`,
        );
      // The shallow fetch has no history: deepen (bounded) to see whether the old head is an ancestor.
      await this.git(
        ["fetch", "--quiet", "--deepen=1000", "--no-tags", "--no-recurse-submodules", "--", this.spec.repository, this.spec.ref],
        undefined,
        true,
        historyFactor * this.spec.max_checkout_size,
      ).catch((err: unknown) => {
        // Too much history to tell: the commit is not followed unless force pushes are (the check is then only a report).
        if (err instanceof ManentError && err.details?.field === "git.max_checkout_size") {
          if (!this.spec.allow_force_push) {
            throw new ManentError(
              Code.InvalidArgument,
              `the history from ${before} to ${fetched} is more than ${historyFactor} × git.max_checkout_size: cannot tell whether branch ${this.spec.ref} was force-pushed; raise git.max_checkout_size or set git.allow_force_push`,
              { details: { field: "git.max_checkout_size" } },
            );
          }
          this.log(`envconfig provider ${this.name}: too much history to check ${fetched} against ${before}; followed (allow_force_push)`);
        }
        return "";
      });
      const descends = await this.git(["merge-base", "--is-ancestor", before, fetched]).then(
        () => true,
        () => false,
      );
      if (!descends) {
        this.log(`envconfig provider ${this.name}: branch ${this.spec.ref} was force-pushed: ${fetched} does not descend from ${before}`);
        if (!this.spec.allow_force_push) {
          throw new ManentError(
            Code.FailedPrecondition,
            `branch ${this.spec.ref} was force-pushed (${fetched} does not descend from ${before}); set git.allow_force_push to follow it`,
          );
        }
      }
    }
    const tree = await this.readTree(fetched);
    for (const [p, e] of tree) {
      if (e.mode === "160000" || p === ".gitmodules" || p.endsWith("/.gitmodules")) {
        throw new ManentError(Code.InvalidArgument, `${p}: submodules are refused in an envconfig repository (commit ${fetched})`, {
          details: { file: p, field: "mode" },
        });
      }
    }
    // The commit's files, as a checkout would hold them (history the ancestry check fetched is not counted).
    const size = [...tree.values()].reduce((sum, e) => sum + e.size, 0);
    if (size > this.spec.max_checkout_size) {
      throw new ManentError(
        Code.InvalidArgument,
        `commit ${fetched} holds ${size} bytes of files, more than git.max_checkout_size (${this.spec.max_checkout_size})`,
        {
          details: { field: "git.max_checkout_size" },
        },
      );
    }
    await this.git(["update-ref", goodRef, fetched]);
    this.commit = fetched;
    this.tree = tree;
    return fetched;
  }

  private async use(commit: string): Promise<void> {
    this.tree = await this.readTree(commit);
    this.commit = commit;
  }

  private async isTag(): Promise<boolean> {
    if (this.spec.ref.startsWith("refs/tags/")) return true;
    const out = await this.git(["ls-remote", "--tags", "--", this.spec.repository, this.spec.ref], undefined, true).catch(() => "");
    return out.trim() !== "";
  }

  private async readTree(commit: string): Promise<Map<string, TreeEntry>> {
    const out = await this.git(["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", commit]);
    const tree = new Map<string, TreeEntry>();
    for (const line of out.split("\0")) {
      if (!line) continue;
      const tab = line.indexOf("\t");
      const [mode, , oid, size] = line.slice(0, tab).split(/\s+/);
      tree.set(line.slice(tab + 1), { mode: mode!, oid: oid!, size: size === "-" ? 0 : Number(size) });
    }
    return tree;
  }

  private scrub(text: string): string {
    let s = text.split(this.spec.repository).join(scrubUrl(this.spec.repository));
    s = s.replace(/([a-z]+:\/\/)[^/@\s]*@/gi, "$1");
    if (this.secretValue) s = s.split(this.secretValue).join("[secret]");
    return s;
  }

  private secretValue: string | undefined;

  /** Runs git with an argument array (no shell), a minimal environment and only the configured transport. */
  private async git(args: string[], maxBuffer = 64 << 20, remote = false, bound?: number): Promise<string> {
    const scheme = this.spec.repository.startsWith("ssh://") ? "ssh" : this.spec.repository.startsWith("https://") ? "https" : "file";
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: this.dir,
      GIT_TERMINAL_PROMPT: "0",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_DIR: this.dir,
    };
    const config = [
      "protocol.allow=never",
      `protocol.${scheme}.allow=always`,
      "core.hooksPath=/dev/null",
      "core.symlinks=false",
      "submodule.recurse=false",
      "fetch.recurseSubmodules=false",
      // Every pack kept as it comes (index-pack), never unpacked in memory first: what is received is on disk, where it is bounded.
      "transfer.unpackLimit=1",
    ];
    let temp: string | undefined;
    try {
      const extra: [string, string][] = [];
      if (remote && scheme === "https" && this.spec.token) {
        this.secretValue = await readSecretRef(`envconfig provider ${this.name}: git.token`, this.spec.token);
        // Through the environment, not argv: another user's ps never shows it.
        extra.push(["http.extraHeader", `Authorization: Bearer ${this.secretValue}`]);
      }
      if (remote && scheme === "https" && this.spec.ca_file) extra.push(["http.sslCAInfo", resolve(this.spec.ca_file)]);
      if (extra.length > 0) {
        env.GIT_CONFIG_COUNT = String(extra.length);
        extra.forEach(([key, value], i) => {
          env[`GIT_CONFIG_KEY_${i}`] = key;
          env[`GIT_CONFIG_VALUE_${i}`] = value;
        });
      }
      if (remote && scheme === "ssh") {
        temp = await mkdtemp(join(tmpdir(), "manent-git-ssh-"));
        let knownHosts = this.spec.known_hosts!;
        if (!isAbsolute(knownHosts) || knownHosts.includes("\n") || knownHosts.includes(" ")) {
          await writeFile(join(temp, "known_hosts"), knownHosts.endsWith("\n") ? knownHosts : `${knownHosts}\n`, { mode: 0o600 });
          knownHosts = join(temp, "known_hosts");
        }
        const ssh = [
          "ssh",
          "-F",
          "/dev/null",
          "-o",
          "BatchMode=yes",
          "-o",
          "IdentitiesOnly=yes",
          "-o",
          `UserKnownHostsFile=${knownHosts}`,
          "-o",
          "StrictHostKeyChecking=yes",
        ];
        if (this.spec.ssh_key) {
          const key = await readSecretRef(`envconfig provider ${this.name}: git.ssh_key`, this.spec.ssh_key);
          await writeFile(join(temp, "key"), `${key}\n`, { mode: 0o600 });
          ssh.push("-i", join(temp, "key"));
        }
        env.GIT_SSH_COMMAND = ssh.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
      }
      const objects = join(this.dir, "objects");
      const base = bound === undefined ? 0 : await treeBytes(objects);
      let oversized = false;
      let watch: NodeJS.Timeout | undefined;
      try {
        return await new Promise<string>((resolve, reject) => {
          // Its own process group when bounded: a kill reaches the helpers it runs (git-remote-https,
          // index-pack), which hold its pipes open.
          const child = spawn("git", [...config.flatMap((c) => ["-c", c]), ...args], {
            env,
            stdio: ["ignore", "pipe", "pipe"],
            detached: bound !== undefined,
          });
          const out: Buffer[] = [];
          const err: Buffer[] = [];
          let outBytes = 0;
          let tooLong = false;
          child.stdout.on("data", (c: Buffer) => {
            outBytes += c.length;
            if (outBytes > maxBuffer) {
              tooLong = true;
              child.kill("SIGKILL");
            } else out.push(c);
          });
          child.stderr.on("data", (c: Buffer) => err.length < 64 && err.push(c));
          child.on("error", (e) => reject(new Error(`git ${args[0]} failed: ${this.scrub(e.message)}`)));
          child.on("close", (code, signal) => {
            const stderr = Buffer.concat(err).toString("utf8").trim();
            if (oversized) {
              reject(
                new ManentError(
                  Code.InvalidArgument,
                  `the fetch passed ${bound} bytes while it was received (git.max_checkout_size is ${this.spec.max_checkout_size}): stopped, nothing of it kept`,
                  { details: { field: "git.max_checkout_size" } },
                ),
              );
            } else if (tooLong) reject(new Error(`git ${args[0]} failed: its output passed ${maxBuffer} bytes`));
            else if (code !== 0) reject(new Error(`git ${args[0]} failed: ${this.scrub(stderr || `exit ${code ?? signal}`)}`));
            else resolve(Buffer.concat(out).toString("utf8"));
          });
          // Bounded while it comes in, not only once it is on disk: a hostile repository cannot fill the workdir.
          if (bound !== undefined) {
            watch = setInterval(() => {
              void treeBytes(objects).then((n) => {
                if (n - base <= bound || oversized) return;
                oversized = true;
                try {
                  process.kill(-child.pid!, "SIGKILL");
                } catch {
                  child.kill("SIGKILL"); // the group ended meanwhile
                }
              });
            }, 100);
          }
        });
      } finally {
        clearInterval(watch);
        if (oversized) await this.removeLeftovers();
      }
    } finally {
      if (temp) await rm(temp, { recursive: true, force: true });
    }
  }

  /** Locks and half-received packs of a git process that did not end by itself (only this process fetches here). */
  private async removeLeftovers(): Promise<void> {
    const pack = join(this.dir, "objects", "pack");
    const objects = join(this.dir, "objects");
    const stale = [
      ...(await readdir(pack).catch(() => [])).filter((f) => f.startsWith("tmp_")).map((f) => join(pack, f)),
      ...(await readdir(objects).catch(() => [])).filter((f) => f.startsWith("incoming-")).map((f) => join(objects, f)),
      ...["shallow.lock", "FETCH_HEAD.lock", "packed-refs.lock", "config.lock"].map((f) => join(this.dir, f)),
    ];
    await Promise.all(stale.map((f) => rm(f, { recursive: true, force: true })));
  }
}

/** The bytes of the files under `dir` (0 when it is not there). */
async function treeBytes(dir: string): Promise<number> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  let total = 0;
  for (const e of entries) {
    if (!e.isFile()) continue;
    total += await lstat(join(e.path, e.name)).then(
      (st) => st.size,
      () => 0,
    );
  }
  return total;
}
