import type { GitEnvconfigSource } from "./git-envconfig-source.js";
import type { SecretStores } from "../secret-stores/secret-stores.js";
import { resolve } from "node:path";
import { builtinPlugins } from "../../plugins/builtin.js";
import { Code, ManentError } from "../errors.js";
import { EnvconfigCache } from "./envconfig-cache.js";
import { manentConfigSchema, type ManentConfig } from "./manent-config.js";
import { loadYamlFile } from "./yaml-file.js";

/** manent.yml after validation, with paths made absolute against the working directory. */
export interface LoadedConfig extends ManentConfig {
  /** The file it came from, for messages. */
  file: string;
  /** Absolute workdir. */
  workdirPath: string;
  /** The directory relative paths resolve against (the process's working directory, as documented). */
  baseDir: string;
  /** Envconfigs parsed by this server, by file and text (absent: every read parses). */
  envconfigCache?: EnvconfigCache;
  /** The git envconfig providers' fetched repositories, by provider name (set by the server). */
  gitEnvconfig?: ReadonlyMap<string, GitEnvconfigSource>;
  /** The external secret stores of secret_stores, opened (set by the server; absent: vault: and k8s: references cannot be read). */
  secretStores?: SecretStores;
}

/** Loads and validates manent.yml. Throws `invalid_argument`/`not_found` naming file, field and reason. */
export async function loadManentConfig(file: string, baseDir = process.cwd()): Promise<LoadedConfig> {
  const config = await loadYamlFile(file, manentConfigSchema);
  for (const [name, entry] of Object.entries(config.plugins)) {
    if (entry.external && name in builtinPlugins) {
      throw new ManentError(
        Code.InvalidArgument,
        `${file}: plugins.${name}: "${name}" is a built-in plugin and cannot name an external one; use another name, such as ${name}-ext`,
        { details: { file, field: `plugins.${name}` } },
      );
    }
    if (!entry.external && !(name in builtinPlugins)) {
      throw new ManentError(
        Code.InvalidArgument,
        `${file}: plugins.${name}: unknown built-in plugin "${name}" (built in: ${Object.keys(builtinPlugins).sort().join(", ")}); an external plugin needs an "external" section`,
        { details: { file, field: `plugins.${name}` } },
      );
    }
  }
  return { ...config, file, workdirPath: resolve(baseDir, config.workdir), baseDir, envconfigCache: new EnvconfigCache() };
}
