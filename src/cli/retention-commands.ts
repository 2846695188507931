import type { Command, Option } from "commander";
import type { ApiClient } from "./api-client.js";
import { printedAsDocument, type Output } from "./output/output-format.js";

const out = (line: string): void => void process.stdout.write(`${line}\n`);

/** `manent retention sweep`: the history retention of manent.yml, now (docs/operations/retention.md). */
export function retentionCommands(program: Command, client: () => Promise<ApiClient>, output: () => Option): void {
  program
    .command("retention")
    .description("the server's history retention (retention in manent.yml)")
    .command("sweep")
    .description(
      "delete now the ended deploys, releases and audit entries the retention policy lets go, as the periodic sweep does (admin)",
    )
    .addOption(output())
    .action(async (o: { output?: Output }) => {
      const swept = await (await client()).sweepHistory();
      if (await printedAsDocument(swept, o.output)) return;
      out(`deleted ${swept.deploys} deploys, ${swept.releases} releases and ${swept.audit_entries} audit entries`);
      for (const file of swept.audit_files) out(`audit entries exported to ${file}`);
    });
}
