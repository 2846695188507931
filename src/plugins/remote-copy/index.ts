import { z } from "zod";
import type { Factory } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";
import { pluginName, RemoteCopyDeployer } from "./deployer.js";

export { RemoteCopyDeployer } from "./deployer.js";
export { paramsSchema, type Params } from "./params.js";
export { fingerprintOf, verifyHostKey, type HostKeyPolicy } from "./host-key.js";

/** manent.yml configuration of the plugin: defaults for any param, overridden by the envconfig's. */
const configSchema = z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String));

/** The built-in `remote-copy` plugin. */
export const remoteCopyFactory: Factory = (config) => {
  const parsed = configSchema.safeParse(config ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ManentError(
      Code.InvalidArgument,
      `plugin ${pluginName}: configuration key ${issue?.path.join(".") ?? "?"}: ${issue?.message ?? "invalid"} (keys are param defaults, strings)`,
      { details: { plugin: pluginName } },
    );
  }
  return new RemoteCopyDeployer(parsed.data);
};
