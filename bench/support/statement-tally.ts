import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

/** What a server sent through pg between a reset and a read: its commits, and each statement (or transaction) counted. */
export interface Tally {
  commits: number;
  statements: [number, string][];
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const tallyDir = tmpdir();
const tallyFile = (pid: number): string => path.join(tallyDir, `manent-tally-${pid}.txt`);

/**
 * How to start a server whose statements are tallied (statement-tally.cjs, loaded with --require):
 * unbundled (unbundled-server.mjs), so that the tally's hook is on the pg it uses. `bin` is the
 * checkout's bin/manent-server.js (this one's, or --ref's).
 */
export function tallied(bin: string): { bin: string; env: Record<string, string> } {
  return {
    bin: path.join(root, "bench/support/unbundled-server.mjs"),
    env: {
      UNBUNDLED_MAIN: path.join(path.dirname(bin), "../dist/server/main.js"),
      COUNT_ROOT: root,
      TALLY_DIR: tallyDir,
      NODE_OPTIONS: `--require ${path.join(root, "bench/support/statement-tally.cjs")}`,
    },
  };
}

/** Starts the server's count again from nothing. */
export function resetTally(pid: number): void {
  process.kill(pid, "SIGUSR2");
}

/** The server's count since its last reset (it writes it when signalled: waited for, up to 10 s). */
export async function readTally(pid: number): Promise<Tally> {
  const file = tallyFile(pid);
  await rm(file, { force: true });
  process.kill(pid, "SIGUSR1");
  let text: string | undefined;
  for (let waited = 0; text === undefined; waited += 50) {
    text = await readFile(file, "utf8").catch(() => undefined);
    if (text === undefined && waited > 10_000) throw new Error(`server ${pid} wrote no tally into ${file}`);
    if (text === undefined) await delay(50);
  }
  await rm(file, { force: true });
  const lines = text.trim().split("\n");
  return {
    commits: Number(lines[0]!.split(" ")[1]),
    statements: lines.slice(1).map((l) => {
      const m = /^\s*(\d+) (.*)$/.exec(l)!;
      return [Number(m[1]), m[2]!];
    }),
  };
}

/** Several servers' counts added up, statement by statement. */
export function sumTallies(tallies: Tally[]): Tally {
  const counts = new Map<string, number>();
  for (const t of tallies) for (const [n, s] of t.statements) counts.set(s, (counts.get(s) ?? 0) + n);
  return {
    commits: tallies.reduce((sum, t) => sum + t.commits, 0),
    statements: [...counts].map(([s, n]): [number, string] => [n, s]).sort((a, b) => b[0] - a[0]),
  };
}
