import { mkdir, open, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { AuditRow } from "../core/retention/retention-store.js";

/**
 * Writes audit entries to `dir` as JSON lines, one file per batch named by the first and last id
 * (`audit-000000000123-000000004567.jsonl`), readable by its owner only. The file is complete and
 * synced (written under a temporary name, then renamed, then the directory synced) before this
 * resolves, so the entries are deleted from the database only once they are on disk.
 */
export async function exportAuditRows(dir: string, rows: AuditRow[]): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const id = (v: string) => v.padStart(12, "0");
  const name = `audit-${id(rows[0]!.id)}-${id(rows.at(-1)!.id)}.jsonl`;
  const final = join(dir, name);
  const partial = join(dir, `.${name}.partial`);
  const file = await open(partial, "w", 0o600);
  try {
    await file.writeFile(rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
    await file.sync();
  } catch (err) {
    await file.close();
    await rm(partial, { force: true });
    throw err;
  }
  await file.close();
  await rename(partial, final);
  const d = await open(dir, "r");
  try {
    await d.sync();
  } finally {
    await d.close();
  }
  return final;
}
