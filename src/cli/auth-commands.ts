import { Argument, type Command, type Option } from "commander";
import { actions, type Action } from "../core/identity/grants.js";
import type { ApiClient } from "./api-client.js";
import { Exit } from "./exit-codes.js";
import { printedAsDocument, type Output } from "./output/output-format.js";

const out = (line: string): void => void process.stdout.write(`${line}\n`);

/**
 * `manent auth whoami` and `manent auth can-i`: who the server takes the caller for, and whether it
 * may take an action somewhere (exit 0 yes, 1 no, as `kubectl auth can-i`), so a policy can be tested.
 */
export function authCommands(program: Command, client: () => Promise<ApiClient>, output: () => Option): void {
  const auth = program.command("auth").description("who you are to the server and what you may do where");

  auth
    .command("whoami")
    .description("show who the server takes you for (a person, a token or anonymous) and your roles and where they apply")
    .addOption(output())
    .action(async (o: { output?: Output }) => {
      const me = await (await client()).whoami();
      if (await printedAsDocument(me, o.output)) return;
      out(`${me.name} (${me.id})${me.email !== undefined && me.email !== me.name ? ` <${me.email}>` : ""}`);
      if (me.groups.length > 0) out(`groups: ${me.groups.join(", ")}`);
      if (me.grants.length === 0) out("no roles: you may not see anything");
      for (const g of me.grants)
        out(`${g.role}\ttenant ${g.scope.tenant}\tapplication ${g.scope.application}\tenvironment ${g.scope.environment}`);
    });

  auth
    .command("can-i")
    .description(
      "whether you may take ACTION in a tenant, application and environment, and why; exit 0 yes, 1 no. " +
        "A scope left out means any value (only a grant for all of them allows it)",
    )
    .addArgument(new Argument("<action>", "the action").choices(actions))
    .option("--tenant <tenant>", "the tenant (default untenanted, as a descriptor's)")
    .option("--application <application>", "the application")
    .option("--environment <environment>", "the environment")
    .addOption(output())
    .action(async (action: Action, o: { tenant?: string; application?: string; environment?: string; output?: Output }) => {
      const answer = await (await client()).canI({ action, tenant: o.tenant, application: o.application, environment: o.environment });
      if (!(await printedAsDocument(answer, o.output))) out(`${answer.allowed ? "yes" : "no"}: ${answer.reason}`);
      process.exitCode = answer.allowed ? Exit.Ok : Exit.No;
    });
}
