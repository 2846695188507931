import { Code, ManentError } from "../../core/errors.js";
import type { SecretsAccessor } from "../../core/contract/types.js";
import { SecretsClient } from "../gen/deployer.js";
import type { Broker } from "../protocol/broker.js";
import { fromServiceError } from "../protocol/wire-errors.js";
import type { ServiceError } from "@grpc/grpc-js";

/**
 * The secrets of one call, read from the host's Secrets service on the broker id the request
 * names. Usable only while the call runs: the host closes the service when the call returns, and
 * this side refuses lookups too.
 */
export function callSecrets(broker: Broker, brokerId: number, call: string): { secrets: SecretsAccessor; end(): void } {
  let active = true;
  if (brokerId === 0) {
    return {
      secrets: {
        secret: (name) =>
          Promise.reject(
            new ManentError(Code.FailedPrecondition, `secret ${name}: ${call} has no access to secrets`, { details: { secret: name } }),
          ),
      },
      end: () => {},
    };
  }
  let client: Promise<SecretsClient> | undefined;
  const connect = () => (client ??= broker.dial(brokerId, (target, creds, opts) => new SecretsClient(target, creds, opts)));
  // Dialled on the first lookup: this side's broker keeps the connection info until the call
  // ends, so a call that reads no secret costs no connection.
  return {
    secrets: {
      async secret(name: string): Promise<string> {
        if (!active)
          throw new ManentError(Code.FailedPrecondition, `secret ${name}: the ${call} call has returned, secrets are no longer available`, {
            details: { secret: name },
          });
        const c = await connect();
        return new Promise((resolve, reject) =>
          c.secret({ name }, (err: ServiceError | null, res) =>
            err ? reject(fromServiceError(err, "host", `Secret(${name})`)) : resolve(res.value),
          ),
        );
      },
    },
    end() {
      active = false;
      broker.forget(brokerId);
      client?.then((c) => c.close()).catch(() => {});
    },
  };
}
