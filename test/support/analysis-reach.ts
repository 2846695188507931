import { ArtifactPolicy } from "../../src/core/artifacts/artifact-policy.js";
import { artifactsConfigSchema } from "../../src/core/config/artifacts-config.js";
import type { Reach } from "../../src/core/rollout/analysis/index.js";

/** The address rules of a server whose manent.yml allows `networks` (none: the default rules). */
export function reachUnder(networks: string[]): Reach {
  const policy = new ArtifactPolicy({
    artifacts: artifactsConfigSchema.parse({ allowed_networks: networks }),
    baseDir: "/",
    workdirPath: "/nonexistent-workdir",
  });
  return (url, field) => policy.checkHost(url.hostname, field);
}

/** The rules of the tests' servers: checks may call the loopback servers the tests start. */
export const loopbackReach = reachUnder(["127.0.0.1/32"]);
