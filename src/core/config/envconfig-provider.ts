import { createHash } from "node:crypto";
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

/** Where a deploy's envconfig came from: recorded with the deploy, shown by the API, CLI and UI. */
export interface EnvconfigOrigin {
  provider: "file" | "git"; // the provider's type
  path: string; // the path the template named (for git: relative to the repository root)
  sha256: string; // hex sha256 of the exact bytes parsed
  repository?: string; // git: the repository URL, credentials removed
  ref?: string; // git: the ref tracked (branch, tag or commit)
  commit?: string; // git: the commit the bytes were read at (40 hex)
}
export interface FoundEnvconfig {
  envconfig: Envconfig;
  /** The file it came from; undefined when none was found and none is required. */
  file?: string;
  /** The exact text parsed (undefined when none was found). */
  text?: string;
  origin?: EnvconfigOrigin;
}

// A key value names one path component: a plain name, never a separator or a parent.
const plainName = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

/**
 * Finds the envconfig of a deploy: the first provider whose file exists wins. When none exists,
 * `envconfig.required` decides between an error and an empty envconfig. With the config's
 * envconfig cache, what it returns is frozen (shared by the deploys that read the same text).
 */
export async function findEnvconfig(config: LoadedConfig, key: EnvconfigKey): Promise<FoundEnvconfig> {
  const tried: string[] = [];
  for (const provider of config.envconfig.providers) {
    if (provider.type === "git") {
      for (const k of ["tenant", "application", "artifact", "environment"] as const) {
        if (!plainName.test(key[k]) || key[k].includes("..")) {
          throw new ManentError(
            Code.InvalidArgument,
            `envconfig provider ${provider.name}: ${k} ${JSON.stringify(key[k])} is not a plain name`,
            {
              details: { file: provider.git.path, field: k },
            },
          );
        }
      }
      const path = provider.git.path.replace(/\{(tenant|application|artifact|environment)\}/g, (_, k: keyof EnvconfigKey) => key[k]);
      const source = config.gitEnvconfig?.get(provider.name);
      if (!source)
        throw new ManentError(
          Code.FailedPrecondition,
          `envconfig provider ${provider.name}: the git repository is not fetched in this process`,
        );
      const found = await source.read(path);
      if (!found) {
        tried.push(`${path} (${provider.name})`);
        continue;
      }
      const parse = (t: string) => parseYaml(t, path, envconfigSchema);
      const cacheKey = `git:${provider.name}:${path}`;
      return {
        envconfig: config.envconfigCache ? config.envconfigCache.get(cacheKey, found.text, parse) : parse(found.text),
        file: path,
        text: found.text,
        origin: {
          provider: "git",
          path,
          sha256: createHash("sha256").update(found.text).digest("hex"),
          repository: found.repository,
          ref: found.ref,
          commit: found.commit,
        },
      };
    }
    const path = provider.file.path.replace(/\{(tenant|application|artifact|environment)\}/g, (_, k: keyof EnvconfigKey) => key[k]);
    const file = isAbsolute(path) ? path : resolve(config.baseDir, path);
    try {
      const parse = (t: string) => parseYaml(t, path, envconfigSchema);
      const read = config.envconfigCache
        ? await config.envconfigCache.read(file, path, parse)
        : await readYamlText(file, path).then((text) => ({
            text,
            sha256: createHash("sha256").update(text).digest("hex"),
            envconfig: parse(text),
          }));
      return {
        envconfig: read.envconfig,
        file: path,
        text: read.text,
        origin: { provider: "file", path, sha256: read.sha256 },
      };
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
