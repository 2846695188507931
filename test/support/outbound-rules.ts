import { ArtifactPolicy } from "../../src/core/artifacts/artifact-policy.js";
import type { Outbound } from "../../src/core/artifacts/network.js";
import { artifactsConfigSchema } from "../../src/core/config/artifacts-config.js";
import { nodeNetwork } from "../../src/net/node-network.js";

/** The address rules of a server whose manent.yml allows `networks` (none: the default rules), on the real network. */
export function outboundUnder(networks: string[]): Outbound {
  const network = nodeNetwork();
  return new ArtifactPolicy({
    artifacts: artifactsConfigSchema.parse({ allowed_networks: networks }),
    baseDir: "/",
    workdirPath: "/nonexistent-workdir",
    lookup: network.lookup,
  }).outbound(network);
}

/** The rules of the tests' servers: checks may call the loopback servers the tests start. */
export const loopbackOutbound = outboundUnder(["127.0.0.1/32"]);
