import { execFileSync } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { tempDir } from "./temp-dir.js";

/** A real repository: a work tree pushed to a bare one, which the provider fetches over file:// or as a local path. */
export async function upstream() {
  const root = await tempDir("manent-git-env-");
  const work = join(root, "work");
  const bare = join(root, "origin.git");
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", ...args], {
      cwd: work,
      encoding: "utf8",
    }).trim();
  await mkdir(work);
  git("init", "--quiet");
  execFileSync("git", ["init", "--bare", "--quiet", bare]);
  const commit = async (files: Record<string, string>, message: string) => {
    for (const [p, text] of Object.entries(files)) {
      await mkdir(join(work, p, ".."), { recursive: true });
      await writeFile(join(work, p), text);
    }
    git("add", "-A");
    git("commit", "--quiet", "-m", message);
    git("push", "--quiet", "--force", bare, "HEAD:refs/heads/main");
    return git("rev-parse", "HEAD");
  };
  return { root, work, bare, git, commit };
}

/** manent.yml's `envconfig` reading every envconfig from one git provider, `gitops`, fetched hourly (tests refresh it). */
export function gitEnvconfig(repository: string, git: Record<string, unknown> = {}) {
  return {
    required: true,
    providers: [
      {
        name: "gitops",
        type: "git",
        git: { repository, path: "{tenant}/{application}/{artifact}/{environment}.yml", interval: "1h", ...git },
      },
    ],
  };
}
