import { envconfigOrigin } from "./envconfig-origin.js";
import { open } from "node:fs/promises";
import { dirname, isAbsolute, resolve } from "node:path";
import { Command, CommanderError, Option } from "commander";
import type { DeployView } from "../core/engine/deploy-events.js";
import type { DeployRecord } from "../core/engine/deploy-store.js";
import { Code, ManentError } from "../core/errors.js";
import { auditActions } from "../core/identity/audit-actions.js";
import { version } from "../version.js";
import type { ApiClient } from "./api-client.js";
import { authCommands } from "./auth-commands.js";
import { completionCommand } from "./completion/completion-command.js";
import { uploadCommands } from "./upload-commands.js";
import { retentionCommands } from "./retention-commands.js";
import { releaseCommands } from "./release-commands.js";
import { Exit, exitCodeFor } from "./exit-codes.js";
import { parseServerUrl } from "./server-url.js";
import { colourFor, type Painter } from "./output/colour.js";
import { documentOf, isDocument, outputOf, outputOption, printedAsDocument, type Output } from "./output/output-format.js";
import { tableLines } from "./output/table.js";
import { overviewCommand } from "./overview-command.js";
// What only some commands use is imported when they run (a `manent --help` or a `manent status`
// loads neither zod nor yaml): the CLI's start time is mostly module loading.

/** Descriptors are small; a larger file is refused before it is read whole. */
export const maxDescriptorBytes = 1 << 20;
interface GlobalOpts {
  server: string;
  token?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /** false with --no-color. */
  color: boolean;
}

const out = (line: string): void => void process.stdout.write(`${line}\n`);
const err = (line: string): void => void process.stderr.write(`${line}\n`);

/** The `manent` command line. Exit codes: see {@link Exit}. */
export async function main(argv: string[]): Promise<void> {
  quietOnClosedPipe();
  const program = new Command("manent")
    .version(version)
    .description("submit deploys to manent-server and follow them")
    .addOption(
      new Option("--server <url>", "manent-server's address (http:// or https://)")
        .env("MANENT_SERVER")
        .default("http://127.0.0.1:8080")
        .argParser(parseServerUrl),
    )
    .addOption(new Option("--token <token>", "API token, or a CI job's own ID token (auth.workload_identities)").env("MANENT_TOKEN"))
    .addOption(
      new Option(
        "--ca-file <pem>",
        "trust the CA certificates in this file (instead of the system's) for an https:// server; for its OpenID provider, beside the system's",
      ).env("MANENT_CA_FILE"),
    )
    .addOption(
      new Option("--cert-file <pem>", "client certificate, for a server with mutual TLS (tls.client_ca_file)").env("MANENT_CLIENT_CERT"),
    )
    .addOption(new Option("--key-file <pem>", "the private key of --cert-file").env("MANENT_CLIENT_KEY"))
    .option("--no-color", "no colours (also when NO_COLOR is set); colours are used only on a terminal")
    .showHelpAfterError()
    // Program options only before the subcommand, so `deploy --version V` is the deploy's flag.
    .enablePositionalOptions()
    .exitOverride();
  let transport: Promise<typeof fetch | undefined> | undefined;
  /** One transport (and connection pool) to the server for the whole command; undici is loaded only for --ca-file or --cert-file. */
  const serverTransport = (): Promise<typeof fetch | undefined> => {
    const g = program.opts<GlobalOpts>();
    return (transport ??= g.server.startsWith("https:")
      ? import("./tls-transport.js").then(({ tlsFetch }) => tlsFetch(g))
      : Promise.resolve(undefined));
  };
  /** How `manent login` and the renewal of its tokens reach the OpenID provider (--ca-file trusted beside the system's roots). */
  let toProvider: Promise<typeof fetch | undefined> | undefined;
  const providerTransport = (): Promise<typeof fetch | undefined> =>
    (toProvider ??= import("./tls-transport.js").then(({ providerFetch }) => providerFetch(program.opts<GlobalOpts>())));
  const client = async (opts: { anonymous?: boolean } = {}): Promise<ApiClient> => {
    const g = program.opts<GlobalOpts>();
    const [{ ApiClient }, fetchWith] = await Promise.all([import("./api-client.js"), serverTransport()]);
    if (opts.anonymous) return new ApiClient(g.server, undefined, fetchWith);
    if (g.token !== undefined) return new ApiClient(g.server, g.token, fetchWith);
    // No token given: the ID token `manent login` stored for this server, if any. oidc-login.js
    // (openid-client and jose: ~60 ms of CPU to load) only when that token has to be renewed.
    const { freshIdToken, loadLogin } = await import("./login/credentials.js");
    const login = await loadLogin(g.server);
    if (!login) return new ApiClient(g.server, undefined, fetchWith);
    const fresh = freshIdToken(login);
    if (fresh !== undefined) return new ApiClient(g.server, fresh, fetchWith);
    const { idTokenFor } = await import("./login/oidc-login.js");
    return new ApiClient(g.server, await idTokenFor(g.server, providerTransport), fetchWith);
  };
  const output = outputOption;
  /** Colours for what goes to this stream (a terminal's, unless NO_COLOR or --no-color). */
  const colours = (stream: NodeJS.WriteStream): Painter => colourFor(stream, program.opts<GlobalOpts>().color);

  program
    .command("deploy")
    .description("deploy what a descriptor describes, and follow it to the end")
    .requiredOption("-f, --file <descriptor>", "the descriptor (apiVersion: manent/v1)")
    .option("--dry-run", "resolve, fetch, validate and ask the plugin what it would do; change nothing")
    .option("--version <version>", "deploy this version instead of the descriptor's")
    .option(
      "--source <source>",
      "take the artifact from here instead: a local file (uploaded), an http(s) URL or a file:// path on the server",
    )
    .option("--sha256 <hex>", "expected sha256 of the artifact")
    .option(
      "--override-window <reason>",
      "deploy now whatever the deploy windows and freezes say (admins only: the window_override permission); the reason is kept in the audit log",
    )
    .option("--no-wait", "print the deploy id and return at once")
    .addOption(output())
    .action(
      async (o: {
        file: string;
        dryRun?: boolean;
        version?: string;
        source?: string;
        sha256?: string;
        overrideWindow?: string;
        wait: boolean;
        output?: Output;
      }) => {
        const descriptor = await readDescriptor(o.file);
        const { artifactOverrides } = await import("./local-artifact.js");
        const overrides = await artifactOverrides(client, descriptor, o.file, o, absoluteSource);
        const submitted = await (
          await client()
        ).submit({
          descriptor,
          descriptor_file: o.file,
          dry_run: o.dryRun === true,
          overrides,
          ...(o.overrideWindow !== undefined && { window_override: { reason: o.overrideWindow } }),
        });
        await follow(await client(), submitted, o.wait, outputOf(o.output), colours);
      },
    );

  program
    .command("rollback")
    .description("return an application's environment to an earlier release, without fetching anything")
    .requiredOption("-f, --file <descriptor>", "the descriptor naming the application and environment")
    .option("--to <version>", "the version to return to (default: the last good one before the current)")
    .option("--no-wait", "print the deploy id and return at once")
    .addOption(output())
    .action(async (o: { file: string; to?: string; wait: boolean; output?: Output }) => {
      const descriptor = await readDescriptor(o.file);
      const submitted = await (await client()).rollback({ descriptor, descriptor_file: o.file, ...(o.to !== undefined && { to: o.to }) });
      await follow(await client(), submitted, o.wait, outputOf(o.output), colours);
    });

  program
    .command("retry")
    .description(
      "retry a failed, rolled back or cancelled deploy: a new deploy of the same artifact (the same sha256) with the settings the deploy was run with, followed to the end",
    )
    .argument("<id>", "the deploy to retry")
    .option("--no-wait", "print the new deploy's id and return at once")
    .addOption(output())
    .action(async (id: string, o: { wait: boolean; output?: Output }) => {
      const submitted = await (await client()).retry(id);
      await follow(await client(), submitted, o.wait, outputOf(o.output), colours);
    });

  program
    .command("status")
    .description("show a deploy: its steps, targets and result")
    .argument("<id>", "deploy id")
    .option("-w, --watch", "follow it to the end (on a terminal: one view redrawn in place; in a pipe: a line per change)")
    .addOption(output())
    .action(async (id: string, o: { watch?: boolean; output?: Output }) => {
      const api = await client();
      const d = await follow(api, { id }, o.watch === true, outputOf(o.output), colours, true);
      if (!isDocument(outputOf(o.output))) await printDrift(api, d);
    });

  program
    .command("diff")
    .description(
      "check now whether the targets of a descriptor's environment still run what was last deployed there (exit 1 when one does not), " +
        "and show the envconfig change a new deploy would bring",
    )
    .requiredOption("-f, --file <descriptor>", "the descriptor naming the application and environment")
    .addOption(output())
    .action(async (o: { file: string; output?: Output }) => {
      const descriptor = await readDescriptor(o.file);
      const report = await (await client()).checkDrift({ descriptor, descriptor_file: o.file });
      process.exitCode = report.targets.some((t) => t.state === "drifted") ? Exit.Drifted : Exit.Ok;
      if (await printedAsDocument(report, o.output)) return;
      const { driftLines, envconfigLines } = await import("./drift-printer.js");
      out(`${report.application} in ${report.environment}: compared with deploy ${report.deploy_id} (version ${report.expected_version})`);
      for (const line of driftLines(report.targets)) out(line);
      // A server from before the comparison sends none.
      if (report.envconfig) for (const line of envconfigLines(report.envconfig)) out(line);
    });

  program
    .command("cancel")
    .description("cancel a queued or running deploy (refused once its deploy step has finished: roll back instead)")
    .argument("<id>", "deploy id")
    .addOption(output())
    .action(async (id: string, o: { output?: Output }) => {
      const d = await (await client()).cancel(id);
      if (await printedAsDocument(d, o.output)) return;
      out(`${d.id} ${d.cancel?.outcome ?? d.status}${d.cancel ? `: ${d.cancel.message}` : ""}`);
    });

  program
    .command("override-window")
    .description(
      "start a deploy that waits for its deploy window now, whatever the windows and freezes say (admins only: the window_override permission); the reason is kept in the audit log",
    )
    .argument("<id>", "deploy id")
    .requiredOption("--reason <text>", "why it may not wait (an incident, a ticket)")
    .addOption(output())
    .action(async (id: string, o: { reason: string; output?: Output }) => {
      const d = await (await client()).overrideWindow(id, o.reason);
      if (await printedAsDocument(d, o.output)) return;
      out(`${d.id} window overridden: it starts now (reason kept in the audit log)`);
    });

  const rolloutCommand = (command: "approve" | "promote" | "abort", description: string, withFull = false) => {
    const cmd = program.command(command).description(description).argument("<id>", "deploy id").addOption(output());
    if (withFull) cmd.option("--full", "skip every remaining step and gate, and promote now");
    cmd.action(async (id: string, o: { full?: boolean; output?: Output }) => {
      const d = await (await client()).rolloutCommand(id, command, o.full === true);
      if (await printedAsDocument(d, o.output)) return;
      const done = d.rollout?.commands.at(-1);
      out(
        `${d.id} ${command}${o.full ? " --full" : ""} sent${done?.by ? ` by ${done.by}` : ""}${done?.during ? ` during ${done.during}` : ""}`,
      );
    });
  };
  rolloutCommand("approve", "approve the approval step or gate a rollout waits at");
  rolloutCommand("promote", "end a rollout's current pause; with --full, skip every remaining step and promote now", true);
  rolloutCommand("abort", "abort a rollout now: weight 0, candidate reverted, earlier waves rolled back");

  // For the completion scripts: recent ids, one "id<TAB>what it is" line each; nothing when the server cannot be asked.
  program
    .command("__complete-ids", { hidden: true })
    .description("print recent deploy or release ids for the completion scripts")
    .argument("<kind>", "deploys or releases")
    .action(async (kind: string) => {
      try {
        const api = await client();
        const lines =
          kind === "releases"
            ? (await api.releases({ limit: "30" })).releases.map((r) => `${r.id}\trelease of ${r.application} ${r.version}, ${r.status}`)
            : (await api.list({ limit: "30" })).deploys.map(
                (d) => `${d.id}\t${d.application} ${d.version} in ${d.environment}, ${d.status}`,
              );
        for (const line of lines) out(line);
      } catch {
        // A completion offers nothing rather than print an error into the command line.
      }
    });

  program
    .command("history")
    .description("list deploys, newest first")
    .option("--tenant <tenant>", "only this tenant's deploys (a tenant's token sees only its own)")
    .option("--application <application>", "only this application's deploys")
    .option("--environment <environment>", "only deploys to this environment")
    .option("--artifact <artifact>", "only deploys of this artifact")
    .addOption(
      new Option("--status <status>", "only deploys in this status").choices([
        "queued",
        "running",
        "succeeded",
        "failed",
        "rolled_back",
        "cancelled",
      ]),
    )
    .option("--limit <n>", "how many", "20")
    .addOption(output())
    .action(
      async (o: {
        tenant?: string;
        application?: string;
        environment?: string;
        artifact?: string;
        status?: string;
        limit: string;
        output?: Output;
      }) => {
        const { deploys } = await (
          await client()
        ).list({
          tenant: o.tenant,
          application: o.application,
          environment: o.environment,
          artifact: o.artifact,
          status: o.status,
          limit: o.limit,
        });
        if (await printedAsDocument(deploys, o.output)) return;
        const paint = colours(process.stdout);
        const wide = outputOf(o.output) === "wide";
        const rows = [
          ["CREATED", "ID", "KIND", "APPLICATION", "ENVIRONMENT", "VERSION", "STATUS"].concat(
            wide ? ["TENANT", "ARTIFACT", "PLUGIN", "SUBMITTED_BY", "STARTED", "FINISHED", "ENVCONFIG", "ERROR"] : [],
          ),
        ];
        for (const d of deploys) {
          const row = [d.created_at, d.id, d.kind, d.application, d.environment, d.version, paint.status(d.status)];
          if (wide)
            row.push(
              d.tenant,
              d.artifact,
              d.plugin ?? "-",
              d.submitted_by ?? "-",
              d.started_at ?? "-",
              d.finished_at ?? "-",
              d.envconfig ? envconfigOrigin(d.envconfig) : "-",
              d.error?.message ?? "",
            );
          rows.push(row);
        }
        for (const line of tableLines(rows)) out(line);
      },
    );

  const plugins = program
    .command("plugins")
    .description("list the server's plugins and their capabilities (external plugins are not started); `plugins restart NAME` restarts one")
    .addOption(output())
    .action(async (o: { output?: Output }) => {
      const { plugins } = await (await client()).plugins();
      if (await printedAsDocument(plugins, o.output)) return;
      const paint = colours(process.stdout);
      if (outputOf(o.output) === "wide") {
        const rows = [["NAME", "KIND", "STATUS", "RESTARTS", "LAST_START", "CAPABILITIES", "CAPABILITIES_AS_OF", "LAST_ERROR"]];
        for (const p of plugins) {
          const row = [p.name, p.kind, paint.status(p.status ?? "-"), String(p.restarts ?? "-"), p.last_start ?? "-"];
          rows.push([...row, p.capabilities?.join(",") ?? "-", p.capabilities_as_of ?? "-", p.last_error ?? ""]);
        }
        for (const line of tableLines(rows)) out(line);
        return;
      }
      const rows: string[][] = [];
      for (const p of plugins) {
        const caps =
          p.capabilities !== null
            ? p.capabilities.join(", ") || "(none)"
            : p.status === "start_failed"
              ? "(unknown: its start failed; the next use tries again)"
              : "(not started yet: capabilities known after its first use)";
        rows.push([p.name, p.kind, caps, ...(p.status ? [paint.status(p.status)] : []), ...(p.last_error ? [p.last_error] : [])]);
      }
      for (const line of tableLines(rows)) out(line);
    });
  plugins
    .command("restart")
    .description(
      "restart an external plugin on the server: out of the gave-up state with a fresh restart budget, or its running process replaced " +
        "(calls in flight fail as retryable and their steps retry); waits until it has started. Needs a token for all tenants",
    )
    .argument("<name>", "the plugin's name under plugins in manent.yml")
    .addOption(output())
    .action(async (name: string, o: { output?: Output }) => {
      const p = await (await client()).restartPlugin(name);
      if (await printedAsDocument(p, o.output)) return;
      out(`${p.name} restarted: ${p.status ?? "up"}${p.last_start ? ` since ${p.last_start}` : ""}`);
    });

  program
    .command("envconfig")
    .description("the server's envconfig providers; `envconfig refresh` fetches the git ones now")
    .command("refresh")
    .description(
      "fetch every git envconfig provider's repository now (a fetch already running is joined) and show each commit before and after; " +
        "a failed fetch keeps the last good commit and exits non-zero. Environments whose envconfig changed and asks for auto_deploy get their deploy now, listed too. " +
        "Needs the admin role for all tenants",
    )
    .addOption(output())
    .action(async (o: { output?: Output }) => {
      const answer = await (await client()).refreshEnvconfig();
      const { providers, auto_deploys: autoDeploys } = answer;
      if (!(await printedAsDocument(answer, o.output))) {
        if (providers.length === 0) out("no git envconfig provider is configured");
        for (const p of providers) out(`${p.provider}	${p.before ?? "-"} -> ${p.after ?? "-"}${p.error ? `	failed: ${p.error}` : ""}`);
        for (const a of autoDeploys) {
          const what = `auto-deploy	${a.tenant}/${a.application}/${a.artifact} in ${a.environment}${a.commit ? ` at ${a.commit.slice(0, 12)}` : ""}`;
          out(`${what}	${a.deploy_id ? `deploy ${a.deploy_id}` : `not submitted: ${a.error ?? "unknown"}`}`);
        }
      }
      if (providers.some((p) => p.error)) process.exitCode = 1;
    });

  program
    .command("audit")
    .description(
      "show the audit log, newest first: who submitted, retried, rolled back, cancelled, approved, promoted or aborted what, restarted which plugin, and refused sign-ins",
    )
    .option("--tenant <tenant>", "only this tenant (you see only the entries where you have audit_read)")
    .option("--actor <name>", "only this actor: a token's name or a person's e-mail")
    .option("--action <action>", `only this action (${auditActions.join(", ")})`)
    .option("--deploy <id>", "only entries about this deploy")
    .option("--outcome <outcome>", 'only this outcome ("ok" or an error code)')
    .option("--limit <n>", "how many", "50")
    .addOption(output())
    .action(
      async (o: {
        tenant?: string;
        actor?: string;
        action?: string;
        deploy?: string;
        outcome?: string;
        limit: string;
        output?: Output;
      }) => {
        const { entries } = await (
          await client()
        ).audit({
          tenant: o.tenant,
          actor: o.actor,
          action: o.action,
          deploy_id: o.deploy,
          outcome: o.outcome,
          limit: o.limit,
        });
        if (await printedAsDocument(entries, o.output)) return;
        const paint = colours(process.stdout);
        const wide = outputOf(o.output) === "wide";
        const more = ["ACTOR_ID", "GROUPS", "APPLICATION", "ENVIRONMENT"];
        const rows = [["AT", "ACTOR", "TENANT", "ACTION", "DEPLOY", "OUTCOME", "CLIENT", ...(wide ? more : []), "MESSAGE"]];
        for (const e of entries) {
          const row = [
            e.at,
            e.actor ?? "-",
            e.tenant ?? "-",
            e.action,
            e.deploy_id ?? "-",
            paint.status(e.outcome),
            e.client_address ?? "-",
          ];
          if (wide) row.push(e.actor_id ?? "-", e.actor_groups?.join(",") || "-", e.application ?? "-", e.environment ?? "-");
          rows.push([...row, e.message ?? ""]);
        }
        for (const line of tableLines(rows)) out(line);
      },
    );

  authCommands(program, client, output);
  overviewCommand(program, client, output);
  uploadCommands(program, client, output);
  retentionCommands(program, client, output);
  releaseCommands(program, { client, output, readDescriptor, absoluteSource, colours });

  const token = program
    .command("token")
    .description(
      "managed API tokens: create (value shown once), list, revoke; stored hashed on the server, refused by every server once revoked",
    );
  token
    .command("create")
    .description("create an API token with a role over tenants, applications and environments (never more than your own rights)")
    .requiredOption("--name <name>", "a unique name, shown in the audit log and on deploys (never reused, even once revoked)")
    .addOption(new Option("--role <role>", "what it may do").choices(["viewer", "deployer", "approver", "admin"]).makeOptionMandatory())
    .requiredOption("--tenant <pattern>", 'the tenants it may act on: a name, a pattern such as team-*, or "*"')
    .option("--application <pattern>", "the applications it may act on", "*")
    .option("--environment <pattern>", "the environments it may act on", "*")
    .requiredOption("--expires <duration>", "how long it is valid: a number and m, h or d (e.g. 30d; at most 366d)")
    .addOption(output())
    .action(
      async (o: {
        name: string;
        role: string;
        tenant: string;
        application: string;
        environment: string;
        expires: string;
        output?: Output;
      }) => {
        if (!/^[1-9][0-9]{0,5}[mhd]$/.test(o.expires))
          throw new ManentError(Code.InvalidArgument, `--expires: "${o.expires}" must be a number and a unit: m, h or d (e.g. 30d, 12h)`, {
            details: { field: "--expires" },
          });
        const t = await (
          await client()
        ).createToken({
          name: o.name,
          role: o.role,
          tenant: o.tenant,
          application: o.application,
          environment: o.environment,
          expires_in: o.expires,
        });
        if (await printedAsDocument(t, o.output)) return;
        out(
          `created token ${t.name} (id ${t.id}): ${t.role} in tenant ${t.tenant}, application ${t.application}, environment ${t.environment}, expires ${t.expires_at}`,
        );
        out(t.token);
        out("This is the only time the token is shown: store it now (e.g. in your CI's secret store).");
      },
    );
  token
    .command("list")
    .description("list the API tokens you may administer, newest first (never their values)")
    .option("--tenant <tenant>", "only tokens for this tenant")
    .option("--limit <n>", "how many", "100")
    .addOption(output())
    .action(async (o: { tenant?: string; limit: string; output?: Output }) => {
      const { tokens } = await (await client()).tokens({ tenant: o.tenant, limit: o.limit });
      if (await printedAsDocument(tokens, o.output)) return;
      const paint = colours(process.stdout);
      const wide = outputOf(o.output) === "wide";
      const more = ["CREATED", "CREATED_BY_ID", "REVOKED", "REVOKED_BY"];
      const rows = [
        [
          "ID",
          "NAME",
          "ROLE",
          "TENANT",
          "APPLICATION",
          "ENVIRONMENT",
          "STATUS",
          "EXPIRES",
          "LAST_USED",
          "CREATED_BY",
          ...(wide ? more : []),
        ],
      ];
      for (const t of tokens) {
        const row = [
          t.id,
          t.name,
          t.role,
          t.tenant,
          t.application,
          t.environment,
          paint.status(t.status),
          t.expires_at,
          t.last_used_at ?? "-",
        ];
        row.push(t.created_by);
        if (wide) row.push(t.created_at, t.created_by_id, t.revoked_at ?? "-", t.revoked_by ?? "-");
        rows.push(row);
      }
      for (const line of tableLines(rows)) out(line);
    });
  token
    .command("revoke")
    .description("revoke an API token: every server refuses it from the next request on")
    .argument("<id>", "the token's id (manent token list)")
    .addOption(output())
    .action(async (id: string, o: { output?: Output }) => {
      const t = await (await client()).revokeToken(id);
      if (await printedAsDocument(t, o.output)) return;
      out(`revoked token ${t.name} (id ${t.id}) at ${t.revoked_at}`);
    });

  program
    .command("login")
    .description(
      "sign in with the server's OpenID Connect provider: in a browser (a loopback redirect), or with --device on a machine without one; the credentials are kept, owner-only, under $XDG_CONFIG_HOME/manent (else ~/.config/manent)",
    )
    .option("--device", "the device flow: print an address and a code to enter on any device with a browser")
    .option("--no-browser", "print the sign-in address instead of opening a browser")
    .action(async (o: { device?: boolean; browser: boolean }) => {
      const { server } = program.opts<GlobalOpts>();
      const { browserLogin, deviceLogin } = await import("./login/oidc-login.js");
      const transports = { server: await serverTransport(), provider: await providerTransport() };
      const login = o.device
        ? await deviceLogin(server, err, transports)
        : await browserLogin(server, err, { openBrowser: o.browser, transports });
      out(`Signed in to ${server} as ${login.name}`);
    });

  program
    .command("logout")
    .description("forget the credentials of manent login for this server, and revoke them at the provider when it allows")
    .action(async () => {
      const { server } = program.opts<GlobalOpts>();
      const { removeLogin } = await import("./login/credentials.js");
      const { revokeAtProvider } = await import("./login/oidc-login.js");
      const login = await removeLogin(server);
      if (!login) return out(`Not signed in to ${server}`);
      const warning = await revokeAtProvider(login, await providerTransport());
      if (warning) err(`manent: ${warning}`);
      out(`Signed out of ${server} (${login.name})`);
    });

  program
    .command("version")
    .description("show the versions of this CLI and of the server it talks to (--server)")
    .addOption(output())
    .action(async (o: { output?: Output }) => {
      const { server } = program.opts<GlobalOpts>();
      const answer = await (await client({ anonymous: true })).serverVersion().then(
        (s) => ({ client: { version }, server: { address: server, version: s.version, api: s.api } }),
        (e: unknown) => ({ client: { version }, server: { address: server, error: ManentError.from(e).toJSON() } }),
      );
      if (!(await printedAsDocument(answer, o.output))) {
        out(`client: manent ${version}`);
        if ("version" in answer.server) out(`server: manent-server ${answer.server.version} at ${server}`);
        else out(`server: unknown — ${answer.server.error.message}`);
      }
      // The client's version is shown either way; the exit says whether the server's could be.
      if ("error" in answer.server) process.exitCode = exitCodeFor(ManentError.fromJSON(answer.server.error));
    });

  completionCommand(program);

  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.code === "commander.helpDisplayed" || err.code === "commander.version" ? Exit.Ok : Exit.BadInput;
      return;
    }
    const e = ManentError.from(err);
    process.stderr.write(`manent: ${e.message}\n`);
    process.exitCode = exitCodeFor(e);
  }
}

/** `manent status`: the drift of the deploy's environment, as its last check found it. */
async function printDrift(api: ApiClient, d: DeployRecord): Promise<void> {
  if (d.kind === "dry_run") return;
  const id = d.id;
  const { targets } = await api.drift({ tenant: d.tenant, application: d.application, environment: d.environment, artifact: d.artifact });
  if (targets.length === 0) return;
  const { driftLines } = await import("./drift-printer.js");
  const compared = targets[0]!.deploy_id === id ? "" : ` (compared with deploy ${targets[0]!.deploy_id})`;
  out(`drift, checked ${targets[0]!.checked_at}${compared}:`);
  for (const line of driftLines(targets)) out(`  ${line}`);
}

/**
 * Reads and checks a descriptor here, so bad input fails fast; a relative source is made absolute
 * against the file's directory. A file larger than any descriptor is refused before it is read.
 */
async function readDescriptor(file: string): Promise<Record<string, unknown>> {
  let text: string;
  const handle = await open(file, "r").catch(() => {
    throw new ManentError(Code.InvalidArgument, `${file}: file not found or not readable`, { details: { file } });
  });
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new ManentError(Code.InvalidArgument, `${file}: not a regular file`, { details: { file } });
    if (info.size > maxDescriptorBytes) {
      throw new ManentError(Code.InvalidArgument, `${file}: ${info.size} bytes, larger than a descriptor may be (${maxDescriptorBytes})`, {
        details: { file },
      });
    }
    const buffer = Buffer.alloc(maxDescriptorBytes + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    if (bytesRead > maxDescriptorBytes)
      throw new ManentError(Code.InvalidArgument, `${file}: larger than a descriptor may be (${maxDescriptorBytes} bytes)`, {
        details: { file },
      });
    text = buffer.subarray(0, bytesRead).toString("utf8");
  } catch (err) {
    if (err instanceof ManentError) throw err;
    throw new ManentError(Code.InvalidArgument, `${file}: cannot read: ${(err as Error).message}`, { details: { file } });
  } finally {
    await handle.close();
  }
  const { parseYaml, descriptorSchema } = await import("../core/config/index.js");
  const descriptor = parseYaml(text, file, descriptorSchema);
  return {
    ...descriptor,
    artifact: {
      ...descriptor.artifact,
      source: await absoluteSource(descriptor.artifact.source, dirname(resolve(file))),
      ...(descriptor.artifact.signature !== undefined && {
        signature: await absoluteSource(descriptor.artifact.signature, dirname(resolve(file))),
      }),
    },
  };
}

async function absoluteSource(source: string, base: string): Promise<string> {
  const { isRemoteSource } = await import("./local-artifact.js");
  return isRemoteSource(source) || isAbsolute(source) ? source : resolve(base, source);
}

/** Where a followed deploy's progress goes: a view redrawn in place on a terminal, lines elsewhere. */
interface Progress {
  update(d: DeployView): void;
  finish(d: DeployView): void;
}

async function follow(
  api: ApiClient,
  submitted: { id: string; queued_behind?: string },
  wait: boolean,
  output: Output,
  colours: (stream: NodeJS.WriteStream) => Painter,
  quietStart = false,
): Promise<DeployRecord> {
  // `manent status` is the dashboard: on a terminal, one view redrawn in place. `deploy` and
  // `rollback` print a timeline, one line per change, that stays in the scrollback and in CI logs.
  const live = quietStart;
  const [{ ProgressPrinter }, { terminalStatuses }] = await Promise.all([
    import("./progress-printer.js"),
    import("../core/engine/deploy-store.js"),
  ]);
  // Text goes to stdout; a document goes to stdout once, at the end, while a person watching the
  // terminal still sees the progress on stderr.
  const stream = isDocument(output) ? (process.stderr.isTTY ? process.stderr : undefined) : process.stdout;
  const write = (line: string) => void stream?.write(`${line}\n`);
  const progress = async (): Promise<Progress | undefined> => {
    if (!stream) return undefined;
    if (live && stream.isTTY) return new (await import("./live-view.js")).LiveView(stream, colours(stream));
    return new ProgressPrinter(write, colours(stream));
  };
  if (!wait) {
    const d = await api.deploy(submitted.id);
    if (isDocument(output)) out(await documentOf(d, output));
    else if (!quietStart) out(submitted.id);
    else if (process.stdout.isTTY) {
      // `manent status ID` on a terminal: the deploy's whole view, once.
      const [{ deployView }, paint] = [await import("./deploy-view.js"), colours(process.stdout)];
      for (const line of deployView(d, paint)) out(line);
    } else new ProgressPrinter(out, colours(process.stdout)).finish(d);
    process.exitCode = terminalStatuses.has(d.status) && d.status !== "succeeded" ? Exit.DeployFailed : Exit.Ok;
    return d;
  }
  const { applyEvent, isFinishEvent } = await import("../core/engine/deploy-events.js");
  if (submitted.queued_behind) write(`queued behind deploy ${submitted.queued_behind} of the same application and environment`);
  let d = await api.deploy(submitted.id);
  const printer = await progress();
  if (!terminalStatuses.has(d.status)) {
    // Follow the deploy's event stream (no polling): its history from the start, then live, until it ends.
    let view: DeployView = { ...d, steps: [], targets: [] };
    await api.streamEvents(
      `/api/v1/deploys/${encodeURIComponent(submitted.id)}/events`,
      (e) => {
        view = applyEvent(view, e) ?? view;
        printer?.update(view);
        return isFinishEvent(e);
      },
      { after: 0 },
    );
    d = await api.deploy(submitted.id); // the final record, with every step's output
  }
  printer?.finish(d);
  if (isDocument(output)) out(await documentOf(d, output));
  process.exitCode = d.status === "succeeded" ? Exit.Ok : Exit.DeployFailed;
  return d;
}

/**
 * `manent … | head -1`: once the reader has gone, stop quietly (as a shell tool does on SIGPIPE)
 * instead of crashing on EPIPE. The deploy goes on on the server; `manent status` follows it.
 */
function quietOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code !== "EPIPE") throw e;
      process.exit(typeof process.exitCode === "number" ? process.exitCode : Exit.Ok);
    });
  }
}
