import { Code, ManentError } from "../../core/errors.js";
import type { SecretsAccessor } from "../../core/contract/types.js";
import { SecretsClient } from "../gen/deployer.js";
import type { Broker } from "../protocol/broker.js";
import { fromServiceError } from "../protocol/wire-errors.js";
import type { ServiceError } from "@grpc/grpc-js";

/**
 * The Secrets session the host offered at Configure (docs/plugin-protocol.md, section 5): its one
 * broker id is dialled once, right after Configure answers, and the connection is kept for the
 * process's life (gRPC reconnects to the same address if it drops). Calls name themselves by the
 * token each request carries.
 */
export class SecretsSession {
  private client: Promise<SecretsClient> | undefined;
  private id = 0;

  constructor(private readonly broker: Broker) {}

  /** Accepts the session offered under `id` (0: none offered) and dials it in the background. */
  accept(id: number): boolean {
    if (id === 0) return false;
    const previous = this.client;
    this.id = id;
    // The host sends the ConnInfo once it has our answer; dial waits for it (up to 5 s).
    this.client = this.broker.dial(id, (target, creds, opts) => new SecretsClient(target, creds, opts));
    this.client.then(
      (c) => c.getChannel().getConnectivityState(true), // connect now: the first lookup pays no handshake
      () => {},
    );
    previous?.then((c) => c.close()).catch(() => {});
    return true;
  }

  /** The client for lookups of a call that came with a session token. */
  connected(call: string, name: string): Promise<SecretsClient> {
    if (!this.client)
      return Promise.reject(
        new ManentError(Code.FailedPrecondition, `secret ${name}: ${call} names a Secrets session this plugin did not accept`, {
          details: { secret: name },
        }),
      );
    const id = this.id;
    return this.client.catch((err: unknown) => {
      throw new ManentError(
        Code.Unavailable,
        `secret ${name}: connecting to the host's Secrets session (broker id ${id}): ${String(err)}`,
        {
          details: { secret: name },
        },
      );
    });
  }
}

/**
 * The secrets of one call, read from the host's Secrets service: on the session with the call's
 * token when the request carries one, else on the broker id the request names (dialled on the
 * first lookup: a call that reads no secret costs no connection). Usable only while the call
 * runs: the host stops answering for it when the call returns, and this side refuses lookups too.
 */
export function callSecrets(
  broker: Broker,
  session: SecretsSession,
  brokerId: number,
  token: string,
  call: string,
): { secrets: SecretsAccessor; end(): void } {
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
  const connect = (name: string) =>
    token
      ? session.connected(call, name)
      : (client ??= broker.dial(brokerId, (target, creds, opts) => new SecretsClient(target, creds, opts)));
  return {
    secrets: {
      async secret(name: string): Promise<string> {
        if (!active)
          throw new ManentError(Code.FailedPrecondition, `secret ${name}: the ${call} call has returned, secrets are no longer available`, {
            details: { secret: name },
          });
        const c = await connect(name);
        return new Promise((resolve, reject) =>
          c.secret({ name, callToken: token }, (err: ServiceError | null, res) =>
            err ? reject(fromServiceError(err, "host", `Secret(${name})`)) : resolve(res.value),
          ),
        );
      },
    },
    end() {
      active = false;
      if (token) return;
      broker.forget(brokerId);
      client?.then((c) => c.close()).catch(() => {});
    },
  };
}
