import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { CallbackPayload } from "../../src/core/engine/callbacks.js";

/** A webhook receiver on loopback whose calls can be awaited. */
export class CallbackReceiver {
  readonly received: CallbackPayload[] = [];
  private waiters: (() => void)[] = [];
  private server!: Server;
  url = "";

  async start(path = "/callback"): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.received.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as CallbackPayload);
        res.writeHead(200).end("ok");
        for (const w of this.waiters.splice(0)) w();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  async waitFor(match: (p: CallbackPayload) => boolean): Promise<CallbackPayload> {
    for (;;) {
      const found = this.received.find(match);
      if (found) return found;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}
