import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createWriteStream, existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

/** Where scripts/ci/kube-control-plane.sh puts the binaries, and the versions it builds. */
export const toolsBin = `${repoRoot}.tools/bin`;

/** A control-plane binary built by scripts/ci/kube-control-plane.sh, or a clear error. */
export function controlPlaneBinary(name: "etcd" | "kube-apiserver" | "kube-controller-manager"): string {
  const path = `${toolsBin}/${name}`;
  if (!existsSync(path)) {
    throw new Error(
      `${path} is missing: run scripts/ci/kube-control-plane.sh (scripts/test-setup.sh does) to build the Kubernetes control plane`,
    );
  }
  return path;
}

/** A free loopback port (the kernel's choice; closed again before the child binds it). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const port = (srv.address() as { port: number }).port;
  srv.close();
  await once(srv, "close");
  return port;
}

const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const live = new Set<ChildProcess>();
// A test process that dies without its after() hooks must not leave the control plane running.
process.on("exit", () => {
  for (const c of live) c.kill("SIGKILL");
});

/** A child process whose output goes to a log file, killed with the test process. */
export class ManagedProcess {
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    readonly logFile: string,
  ) {
    live.add(child);
    this.exited = once(child, "exit").then(([code, signal]) => {
      live.delete(child);
      return { code: code as number | null, signal: signal as NodeJS.Signals | null };
    });
  }

  static start(name: string, binary: string, args: string[], logFile: string): ManagedProcess {
    const log = createWriteStream(logFile);
    // setpriv: the kernel kills the child when this process dies, even by SIGKILL.
    const [file, argv] = setpriv ? [setpriv, ["--pdeathsig", "KILL", "--", binary, ...args]] : [binary, args];
    const child = spawn(file, argv, { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    return new ManagedProcess(name, child, logFile);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The end of the log, for error messages. */
  tail(chars = 3000): string {
    try {
      return readFileSync(this.logFile, "utf8").slice(-chars);
    } catch {
      return "";
    }
  }

  /** SIGKILL, and its exit awaited: for a process whose state is thrown away. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }

  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}
