import { execFileSync } from "node:child_process";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { repoRoot } from "../../test/support/server-process.js";

/**
 * A checkout of `ref` in a temporary git worktree, its dist/ built (with this checkout's
 * node_modules): its server binary, for a bench that runs an earlier commit's servers beside this
 * checkout's in one run (`--ref`).
 */
export async function checkoutRef(ref: string): Promise<{ bin: string; remove: () => Promise<void> }> {
  const dir = path.join(await mkdtemp(path.join(tmpdir(), "manent-bench-ref-")), "tree");
  execFileSync("git", ["-C", repoRoot, "worktree", "add", "--detach", dir, ref], { stdio: "ignore" });
  const remove = async () => {
    execFileSync("git", ["-C", repoRoot, "worktree", "remove", "--force", dir], { stdio: "ignore" });
    await rm(path.dirname(dir), { recursive: true, force: true });
  };
  try {
    await symlink(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"));
    for (const script of ["scripts/build-js.mjs", "scripts/build-ui.mjs"])
      execFileSync(process.execPath, [script], { cwd: dir, stdio: "ignore" });
    return { bin: path.join(dir, "bin/manent-server.js"), remove };
  } catch (err) {
    await remove();
    throw err;
  }
}
