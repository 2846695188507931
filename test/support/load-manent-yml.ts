import { loadManentConfig, type LoadedConfig } from "../../src/core/config/index.js";
import { createWorkspace } from "./workspace.js";

/** `settings` written as a workspace's manent.yml (as JSON, which is YAML) and loaded as the server loads it. */
export async function loadManentYml(settings: Record<string, unknown>): Promise<LoadedConfig> {
  const ws = await createWorkspace();
  return loadManentConfig(await ws.write("manent.yml", JSON.stringify(settings)), ws.dir);
}
