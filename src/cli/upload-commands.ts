import type { Command, Option } from "commander";
import { formatBytes } from "../core/config/format-bytes.js";
import type { ApiClient } from "./api-client.js";
import { printedAsDocument, type Output } from "./output/output-format.js";
import { tableLines } from "./output/table.js";

const out = (line: string): void => void process.stdout.write(`${line}\n`);

/**
 * `manent uploads list|rm|sweep`: a tenant's uploaded artifacts, what deploys need each, and their
 * removal (refused for one a deploy still needs; see docs/operations/uploads.md).
 */
export function uploadCommands(program: Command, client: () => Promise<ApiClient>, output: () => Option): void {
  const uploads = program
    .command("uploads")
    .description("a tenant's uploaded artifacts: list them with what needs each, remove those no deploy needs");
  const tenantOption = "the tenant (default: your token's one tenant, else untenanted)";

  uploads
    .command("list")
    .description("list a tenant's uploads, newest first, with the deploys that keep each, the total and the quota")
    .option("--tenant <tenant>", tenantOption)
    .addOption(output())
    .action(async (o: { tenant?: string; output?: Output }) => {
      const listing = await (await client()).uploads(o.tenant);
      if (await printedAsDocument(listing, o.output)) return;
      const quota = listing.quota_bytes === null ? "no quota" : `quota ${formatBytes(listing.quota_bytes)}`;
      out(`tenant ${listing.tenant}: ${listing.uploads.length} uploads, ${formatBytes(listing.used_bytes)} (${quota})`);
      const rows = [["SHA256", "SIZE", "CREATED", "NEEDED_BY"]];
      for (const u of listing.uploads) {
        const needed = u.needed_by.map((n) => `${n.deploy} (${n.application}/${n.environment} ${n.version}, ${n.status})`).join(", ");
        rows.push([u.sha256, formatBytes(u.size), u.created_at, needed || "-"]);
      }
      for (const line of tableLines(rows)) out(line);
    });

  uploads
    .command("rm")
    .description("delete uploads no deploy needs; one a queued or running deploy or a recent release needs is refused, naming the deploy")
    .argument("<sha256...>", "the uploads' sha256 (manent uploads list)")
    .option("--tenant <tenant>", tenantOption)
    .addOption(output())
    .action(async (shas: string[], o: { tenant?: string; output?: Output }) => {
      const api = await client();
      const deleted = [];
      for (const sha of shas) deleted.push(await api.deleteUpload(sha, o.tenant));
      if (await printedAsDocument(deleted, o.output)) return;
      for (const d of deleted) out(`deleted upload ${d.sha256} of tenant ${d.tenant} (${formatBytes(d.size)})`);
    });

  uploads
    .command("sweep")
    .description(
      "remove now a tenant's uploads no deploy needs and older than uploads.retention.min_age, as the server's periodic sweep does",
    )
    .option("--tenant <tenant>", tenantOption)
    .option("--dry-run", "only list what would be removed")
    .addOption(output())
    .action(async (o: { tenant?: string; dryRun?: boolean; output?: Output }) => {
      const swept = await (await client()).sweepUploads(o.tenant, o.dryRun === true);
      if (await printedAsDocument(swept, o.output)) return;
      const verb = swept.dry_run ? "would remove" : "removed";
      out(`tenant ${swept.tenant}: ${verb} ${swept.removed.length} uploads (${formatBytes(swept.removed_bytes)})`);
      for (const line of tableLines(swept.removed.map((r) => [r.sha256, formatBytes(r.size)]))) out(line);
    });
}
