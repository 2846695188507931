import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import path from "node:path";
import { Server, type Client, type ChannelCredentials } from "@grpc/grpc-js";
import { Code, ManentError } from "../../core/errors.js";
import type { ConnInfo } from "../gen/go-plugin/grpc_broker.js";
import { BROKER_DIAL_TIMEOUT_MS } from "./constants.js";
import { tlsChannelOptions } from "./credentials.js";
import type { ServerCredentials } from "@grpc/grpc-js";

/**
 * go-plugin's gRPC broker. One long-lived StartStream (opened by the host on the plugin) carries
 * ConnInfo messages: "service id N listens at network/address". The side that serves something
 * for id N binds a fresh socket, announces it, and the other side dials it with the same mTLS
 * identities as the main connection. Multiplexing (knocks) is not used by manent.
 */
export interface Listening {
  address: string;
  close(): Promise<void>;
}

/** The StartStream stream as the broker uses it: the host's (protocol/h2-channel.ts) or a grpc-js server's (the SDK). */
interface Stream {
  on(event: "data", listener: (info: ConnInfo) => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  write(info: ConnInfo): unknown;
  end(): unknown;
}

interface Waiter {
  resolve(info: ConnInfo): void;
}

export class Broker {
  private stream: Stream | undefined;
  private readonly received = new Map<number, ConnInfo>();
  private readonly waiters = new Map<number, Waiter>();
  private nextId = 0;
  private closed = false;

  /**
   * @param socketDir private directory where this side binds its brokered servers
   * @param serverCreds credentials for servers this side brokers
   * @param clientCreds credentials to dial servers the other side brokers
   */
  private readonly serverCreds: () => ServerCredentials;
  private readonly clientCreds: () => ChannelCredentials;

  constructor(
    private readonly socketDir: string,
    serverCreds: () => ServerCredentials,
    clientCreds: () => ChannelCredentials,
  ) {
    // Built once: each builds a TLS context (parses keys), which would dominate a short call.
    this.serverCreds = once(serverCreds);
    this.clientCreds = once(clientCreds);
  }

  /** Attaches the StartStream stream (either end); received ConnInfos wait for dial(). */
  attach(stream: Stream): void {
    this.stream = stream;
    stream.on("data", (info: ConnInfo) => {
      if (info.knock) return; // multiplexing is never negotiated
      const waiter = this.waiters.get(info.serviceId);
      if (waiter) {
        this.waiters.delete(info.serviceId);
        waiter.resolve(info);
      } else {
        this.received.set(info.serviceId, info);
      }
    });
    stream.on("error", () => {
      /* the connection's end is handled by the owner */
    });
  }

  /** A fresh service id, as go-plugin's NextId. */
  newId(): number {
    this.nextId = (this.nextId + 1) >>> 0 || 1;
    return this.nextId;
  }

  /**
   * Binds a new gRPC server on a fresh socket, with the services `register` adds. Announce it
   * under an id with {@link announce}. Closing shuts it down at once: a later call on it fails.
   */
  async listen(register: (server: Server) => void): Promise<Listening> {
    if (this.closed) throw new ManentError(Code.Unavailable, "broker is closed");
    const server = new Server({ "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
    register(server);
    const address = path.join(this.socketDir, `b-${randomBytes(6).toString("hex")}.sock`);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${address}`, this.serverCreds(), (err) => (err ? reject(err) : resolve())),
    );
    return {
      address,
      async close() {
        server.forceShutdown();
        await rm(address, { force: true });
      },
    };
  }

  /** Tells the other side that service `id` listens at `address` (go-plugin's Accept). */
  announce(id: number, address: string): void {
    if (this.closed || !this.stream) throw new ManentError(Code.Unavailable, "broker is closed");
    this.stream.write({ serviceId: id, network: "unix", address, knock: undefined } satisfies ConnInfo);
  }

  /** go-plugin's AcceptAndServe: listen, announce under `id`, return the closer. */
  async acceptAndServe(id: number, register: (server: Server) => void): Promise<() => Promise<void>> {
    const l = await this.listen(register);
    try {
      this.announce(id, l.address);
    } catch (err) {
      await l.close();
      throw err;
    }
    return () => l.close();
  }

  /**
   * Dials what the other side serves for `id`, waiting up to 5 s for its ConnInfo like go-plugin.
   * `make` builds the typed client on the given address.
   */
  async dial<C extends Client>(
    id: number,
    make: (target: string, creds: ChannelCredentials, opts: typeof tlsChannelOptions) => C,
  ): Promise<C> {
    const info = await this.connInfo(id);
    if (info.network !== "unix" && info.network !== "tcp") {
      throw new ManentError(Code.Internal, `broker: unknown network ${JSON.stringify(info.network)} for service ${id}`);
    }
    const target = info.network === "unix" ? `unix:${info.address}` : info.address;
    return make(target, this.clientCreds(), tlsChannelOptions);
  }

  /** Forgets a service id whose call has ended (its ConnInfo may not have been dialed). */
  forget(id: number): void {
    this.received.delete(id);
    this.waiters.delete(id);
  }

  private connInfo(id: number): Promise<ConnInfo> {
    const have = this.received.get(id);
    if (have) {
      this.received.delete(id);
      return Promise.resolve(have);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(id);
        reject(new ManentError(Code.Unavailable, `broker: timeout waiting for connection info of service ${id}`));
      }, BROKER_DIAL_TIMEOUT_MS);
      this.waiters.set(id, {
        resolve: (info) => {
          clearTimeout(timer);
          resolve(info);
        },
      });
    });
  }

  close(): void {
    this.closed = true;
    this.stream?.end();
  }
}

function once<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}
