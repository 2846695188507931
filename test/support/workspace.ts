import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import { tempDir } from "./temp-dir.js";

export interface Workspace {
  dir: string;
  /** Writes a file under the workspace (objects are written as YAML) and returns its path. */
  write(path: string, content: string | object): Promise<string>;
  path(...parts: string[]): string;
}

/**
 * A temporary directory holding a manent.yml, envconfigs, descriptors and artifacts for one test,
 * removed when the test file's process exits (see tempDir).
 */
export async function createWorkspace(prefix = "manent-test-"): Promise<Workspace> {
  const dir = await tempDir(prefix);
  await chmod(dir, 0o755); // reachable by the postgres user when a test uses the embedded default
  return {
    dir,
    path: (...parts) => join(dir, ...parts),
    async write(path, content) {
      const full = join(dir, path);
      await mkdir(dirname(full), { recursive: true });
      await writeFile(full, typeof content === "string" ? content : stringify(content));
      return full;
    },
  };
}

/** A manent.yml for tests: the given database, the file envconfig provider, the noop plugin. */
export function manentYml(databaseUrl: string | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...(databaseUrl && { dbos: { database_url: databaseUrl } }),
    workdir: "./work",
    listen: "127.0.0.1:0",
    plugins: { noop: { artifact_types: ["file"] } },
    // Tests name artifacts in their workspace and serve some over loopback: allowed here explicitly
    // (the default allows neither; test/server/artifact-rules.test.ts tests the refusals).
    artifacts: { allowed_paths: ["."], allowed_urls: ["http://127.0.0.1:*/"], allowed_networks: ["127.0.0.1/32"] },
    envconfig: {
      required: true,
      providers: [{ name: "default", type: "file", file: { path: "./envconfig/{tenant}/{application}/{artifact}/{environment}.yml" } }],
    },
    ...extra,
  };
}

/** A descriptor for tests. */
export function descriptor(application: string, environment: string, source: string, version = "1.0.0"): Record<string, unknown> {
  return { apiVersion: "manent/v1", application, environment, artifact: { type: "file", name: application, version, source } };
}
