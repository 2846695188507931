import { rmSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made = new Set<string>();
let hooked = false;

/**
 * A directory under the system's temporary one, removed when this test file's process exits: a
 * full run made about 200 workspaces and left them all (about 165 MB a run) in /tmp. Kept when
 * the process exits with a failure (a failed test's files are what one looks at next) or when
 * `MANENT_TEST_KEEP_DIRS` is set.
 */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.add(dir);
  if (!hooked) {
    hooked = true;
    // 'exit' handlers run synchronously: the servers and processes a test started are stopped by then.
    process.on("exit", (code) => {
      if (code !== 0 || process.env.MANENT_TEST_KEEP_DIRS) return;
      for (const d of made) {
        try {
          rmSync(d, { recursive: true, force: true, maxRetries: 2 });
        } catch {
          // A file another user's process wrote (the embedded Postgres's, when not run as root): left.
        }
      }
    });
  }
  return dir;
}
