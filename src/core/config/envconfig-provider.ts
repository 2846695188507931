import { isAbsolute, resolve } from "node:path";
import { Code, ManentError } from "../errors.js";
import type { LoadedConfig } from "./load-manent-config.js";
import { envconfigSchema, type Envconfig } from "./envconfig.js";
import { parseYaml, readYamlText } from "./yaml-file.js";

export interface EnvconfigKey {
  tenant: string;
  application: string;
  artifact: string;
  environment: string;
}

export interface FoundEnvconfig {
  envconfig: Envconfig;
  /** The file it came from; undefined when none was found and none is required. */
  file?: string;
}

/**
 * Finds the envconfig of a deploy: the first provider whose file exists wins. When none exists,
 * `envconfig.required` decides between an error and an empty envconfig. With the config's
 * envconfig cache, what it returns is frozen (shared by the deploys that read the same text).
 */
export async function findEnvconfig(config: LoadedConfig, key: EnvconfigKey): Promise<FoundEnvconfig> {
  const tried: string[] = [];
  for (const provider of config.envconfig.providers) {
    const path = provider.file.path.replace(/\{(tenant|application|artifact|environment)\}/g, (_, k: keyof EnvconfigKey) => key[k]);
    const file = isAbsolute(path) ? path : resolve(config.baseDir, path);
    try {
      const text = await readYamlText(file, path);
      const parse = (t: string) => parseYaml(t, path, envconfigSchema);
      return { envconfig: config.envconfigCache ? config.envconfigCache.get(file, text, parse) : parse(text), file: path };
    } catch (err) {
      if (err instanceof ManentError && err.code === Code.NotFound) {
        tried.push(path);
        continue;
      }
      throw err;
    }
  }
  if (config.envconfig.required) {
    throw new ManentError(
      Code.InvalidArgument,
      `no envconfig for ${key.tenant}/${key.application}/${key.artifact}/${key.environment}: ` +
        (tried.length ? `none of ${tried.join(", ")} exists` : "no envconfig provider is configured") +
        ` (envconfig.required is true in ${config.file})`,
      { details: { file: tried[0] ?? config.file } },
    );
  }
  return { envconfig: envconfigSchema.parse({}) };
}
