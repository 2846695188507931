import type { sendUnaryData, ServerUnaryCall } from "@grpc/grpc-js";
import { Code, ManentError } from "../../core/errors.js";
import type { SecretsAccessor } from "../../core/contract/types.js";
import { SecretsService, type SecretRequest, type SecretResponse } from "../gen/deployer.js";
import type { Broker, Listening } from "../protocol/broker.js";
import { toStatus } from "../protocol/wire-errors.js";

interface Prepared {
  listening: Listening;
  slot: { secrets: SecretsAccessor | undefined; call: string };
}

/**
 * The host's per-call Secrets services. Each Deploy, DryRun, CurrentRelease or Rollback gets its
 * own brokered server on a fresh id, closed when the call returns. One server is kept bound in
 * advance so a call does not wait for a socket and a TLS context; it is idle (answers nothing
 * useful) until a call takes it.
 */
export class SecretsServers {
  private spare: Promise<Prepared> | undefined;

  constructor(private readonly broker: Broker) {}

  /** Serves `secrets` for one call; the returned function ends it (later lookups fail at once). */
  async open(secrets: SecretsAccessor, call: string): Promise<{ id: number; close(): void }> {
    const next = this.spare ?? this.prepare();
    this.spare = this.prepare();
    this.spare.catch(() => (this.spare = undefined));
    const p = await next;
    p.slot.secrets = secrets;
    p.slot.call = call;
    const id = this.broker.newId();
    try {
      this.broker.announce(id, p.listening.address);
    } catch (err) {
      await p.listening.close();
      throw err;
    }
    return {
      id,
      close: () => {
        p.slot.secrets = undefined;
        void p.listening.close();
      },
    };
  }

  /** Closes the spare server (the process is going away). */
  async dispose(): Promise<void> {
    const spare = this.spare;
    this.spare = undefined;
    await spare?.then((p) => p.listening.close()).catch(() => {});
  }

  private async prepare(): Promise<Prepared> {
    const slot: Prepared["slot"] = { secrets: undefined, call: "" };
    const listening = await this.broker.listen((server) =>
      server.addService(SecretsService, {
        secret(c: ServerUnaryCall<SecretRequest, SecretResponse>, cb: sendUnaryData<SecretResponse>) {
          const s = slot.secrets;
          if (!s) {
            cb(toStatus(new ManentError(Code.FailedPrecondition, `secret ${c.request.name}: the call that could read it has returned`)));
            return;
          }
          s.secret(c.request.name).then(
            (value) => cb(null, { value }),
            (err: unknown) => cb(toStatus(err)),
          );
        },
      }),
    );
    return { listening, slot };
  }
}
