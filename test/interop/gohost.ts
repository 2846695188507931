import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Report } from "./report.js";
import { scriptSecret } from "./report.js";

const run = promisify(execFile);

/** Runs the Go host's interop script against a plugin command and returns its report. */
export async function runGoHost(gohost: string, base: string, plugin: string[]): Promise<Report> {
  try {
    const { stdout } = await run(gohost, ["-base", base, "-secret", scriptSecret, "--", ...plugin], {
      timeout: 120_000,
      maxBuffer: 16 << 20,
    });
    return JSON.parse(stdout) as Report;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`manent-gohost failed: ${e.message}\n${e.stderr ?? ""}`);
  }
}
