import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";

/**
 * Node 20 has a WebSocket client only behind a flag (Node 22 has it always): runs the bench again
 * with it, and exits with its code. Call first, before anything starts.
 */
export async function withWebSocket(): Promise<void> {
  if (typeof globalThis.WebSocket !== "undefined") return;
  const child = spawn(process.execPath, ["--experimental-websocket", ...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => child.kill(signal));
  const [code, signal] = (await new Promise((resolve) => child.on("exit", (...a) => resolve(a)))) as [number | null, string | null];
  process.exit(code ?? (signal ? 1 : 0));
}

/** A minimal DevTools protocol client over the inspector's WebSocket. */
export class Inspector {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private onEvent: (method: string, params: Record<string, unknown>) => void = () => {};
  private constructor(private readonly ws: WebSocket) {
    ws.addEventListener("message", (e) => {
      const msg = JSON.parse(String(e.data)) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
        method?: string;
        params?: Record<string, unknown>;
      };
      if (msg.id === undefined) return this.onEvent(msg.method!, msg.params ?? {});
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(msg.error.message));
      else p?.resolve(msg.result);
    });
  }
  static async connect(url: string): Promise<Inspector> {
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => {
      ws.addEventListener("open", resolve, { once: true });
      ws.addEventListener("error", () => reject(new Error(`cannot connect to the inspector at ${url}`)), { once: true });
    });
    return new Inspector(ws);
  }
  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise<T>((resolve, reject) => this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject }));
  }
  /** The server's own view: process.memoryUsage() and V8's code space. */
  async memoryUsage(): Promise<{ heapUsed: number; heapTotal: number; external: number; codeSpace: number }> {
    const expression = `(() => {
      const m = process.memoryUsage();
      const spaces = process.getBuiltinModule("node:v8").getHeapSpaceStatistics();
      const codeSpace = spaces.filter((s) => s.space_name.startsWith("code")).reduce((a, s) => a + s.space_size, 0);
      return { heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, codeSpace };
    })()`;
    const r = await this.send<{ result: { value: { heapUsed: number; heapTotal: number; external: number; codeSpace: number } } }>(
      "Runtime.evaluate",
      {
        expression,
        returnByValue: true,
      },
    );
    return r.result.value;
  }
  /** Heap used after two full collections (the second collects what the first's finalizers released). */
  async heapUsedAfterGc(): Promise<number> {
    await this.send("HeapProfiler.collectGarbage");
    await this.send("HeapProfiler.collectGarbage");
    return (await this.send<{ usedSize: number }>("Runtime.getHeapUsage")).usedSize;
  }
  async snapshot(file: string): Promise<void> {
    const out = createWriteStream(file);
    this.onEvent = (method, params) => {
      if (method === "HeapProfiler.addHeapSnapshotChunk") out.write(params.chunk as string);
    };
    await this.send("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
    this.onEvent = () => {};
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
  close(): void {
    this.ws.close();
  }
}

/** The inspector address a process started with `--inspect=127.0.0.1:0` printed. */
export function inspectorUrl(logs: string): string {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(logs)?.[1];
  if (!url) throw new Error(`the server printed no inspector address:\n${logs.slice(-2000)}`);
  return url;
}
