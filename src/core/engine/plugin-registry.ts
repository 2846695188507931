import type { Artifact, Capability, Deployer, Factory, HostedPlugin, Logger } from "../contract/index.js";
import { capabilitiesOf } from "../contract/index.js";
import type { ExternalSpec, LoadedConfig } from "../config/index.js";
import { Code, ManentError } from "../errors.js";

/** Builds the host of an external plugin; the server passes the go-plugin host here. */
export type ExternalPluginFactory = (spec: {
  name: string;
  external: ExternalSpec;
  config: Record<string, unknown>;
  baseDir: string;
  /** The server's workdir (private copies of plugin binaries live below it). */
  workdir: string;
  logger: Logger;
  builtinNames: readonly string[];
}) => HostedPlugin | Promise<HostedPlugin>;

/** A built-in plugin: the factory runs on first use, with the plugin's manent.yml section. */
export class BuiltinPlugin implements HostedPlugin {
  readonly kind = "builtin";
  private instance: Promise<Deployer> | undefined;

  constructor(
    readonly name: string,
    private readonly factory: Factory,
    private readonly config: Record<string, unknown>,
    private readonly logger: Logger,
  ) {}

  deployer(): Promise<Deployer> {
    this.instance ??= Promise.resolve()
      .then(() => this.factory(this.config, this.logger))
      .catch((err: unknown) => {
        this.instance = undefined;
        throw new ManentError(Code.InvalidArgument, `plugin ${this.name}: configuration refused: ${ManentError.from(err).message}`, {
          cause: err,
        });
      });
    return this.instance;
  }

  async capabilities(): Promise<Capability[]> {
    return capabilitiesOf(await this.deployer());
  }

  async close(): Promise<void> {}
}

/** The plugins of one server, from manent.yml. */
export class PluginRegistry {
  private constructor(private readonly plugins: Map<string, HostedPlugin>) {}

  /** Builds every configured plugin; external ones are activated (binary checked), not started. */
  static async fromConfig(
    config: LoadedConfig,
    builtins: Record<string, Factory>,
    logger: Logger,
    external?: ExternalPluginFactory,
  ): Promise<PluginRegistry> {
    const plugins = new Map<string, HostedPlugin>();
    for (const [name, entry] of Object.entries(config.plugins)) {
      const { external: spec, ...pluginConfig } = entry;
      const child = childLogger(logger, name);
      if (spec) {
        if (!external) {
          throw new ManentError(Code.Unimplemented, `${config.file}: plugins.${name}: external plugins are not available in this build`);
        }
        const activated = await Promise.resolve(
          external({
            name,
            external: spec,
            config: pluginConfig,
            baseDir: config.baseDir,
            workdir: config.workdirPath,
            logger: child,
            builtinNames: Object.keys(builtins),
          }),
        ).catch((err: unknown) => {
          const e = ManentError.from(err);
          throw new ManentError(e.code, `${config.file}: plugins.${name}: ${e.message}`, {
            cause: err,
            details: { file: config.file, field: `plugins.${name}` },
          });
        });
        plugins.set(name, activated);
      } else {
        plugins.set(name, new BuiltinPlugin(name, builtins[name]!, pluginConfig, child));
      }
    }
    return new PluginRegistry(plugins);
  }

  /** Builds a registry from ready plugins (tests, benchmarks). */
  static of(plugins: HostedPlugin[]): PluginRegistry {
    return new PluginRegistry(new Map(plugins.map((p) => [p.name, p])));
  }

  names(): string[] {
    return [...this.plugins.keys()].sort();
  }

  get(name: string): HostedPlugin | undefined {
    return this.plugins.get(name);
  }

  list(): HostedPlugin[] {
    return [...this.plugins.values()];
  }

  /**
   * The selection policy: the envconfig's `plugin` when given, else the one configured plugin
   * whose `supports()` accepts the artifact. A plugin that cannot answer counts as "no".
   */
  async select(requested: string | undefined, artifact: Artifact, where: string): Promise<HostedPlugin> {
    if (requested !== undefined) {
      const plugin = this.plugins.get(requested);
      if (!plugin) {
        throw new ManentError(
          Code.InvalidArgument,
          `${where}: plugin: unknown plugin "${requested}" (configured in manent.yml: ${this.names().join(", ") || "none"})`,
          { details: { file: where, field: "plugin" } },
        );
      }
      return plugin;
    }
    const accepting: HostedPlugin[] = [];
    for (const plugin of this.plugins.values()) {
      const ok = await plugin
        .deployer()
        .then((d) => d.supports(artifact))
        .catch(() => false);
      if (ok) accepting.push(plugin);
    }
    if (accepting.length === 1) return accepting[0]!;
    throw new ManentError(
      Code.InvalidArgument,
      accepting.length === 0
        ? `${where}: no configured plugin supports artifact type "${artifact.type}"; set plugin in the envconfig`
        : `${where}: several plugins support artifact type "${artifact.type}" (${accepting.map((p) => p.name).join(", ")}); set plugin in the envconfig`,
      { details: { file: where, field: "plugin" } },
    );
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.list().map((p) => p.close()));
  }
}

function childLogger(logger: Logger, plugin: string): Logger {
  const wrap =
    (level: keyof Logger) =>
    (msg: string, attrs?: Record<string, unknown>): void =>
      logger[level](msg, { plugin, ...attrs });
  return { debug: wrap("debug"), info: wrap("info"), warn: wrap("warn"), error: wrap("error") };
}
