import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";

/** What the reaper's command line ends with (`ps` shows it; its $0). */
export const REAPER_NAME = "manent-plugin-reaper";
/** util-linux setpriv: the reaper itself gets a parent-death signal too (belt and braces). */
const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const shell = ["/bin/sh", "/usr/bin/sh"].find((p) => existsSync(p));

/**
 * The reaper's program (POSIX sh, no fork per line): reads "+ PID" (watch) and "- PID" (forget)
 * on stdin and, when stdin reaches EOF (the kernel closes the host's end of the pipe however the
 * host dies, SIGKILL included) or on SIGTERM (its own parent-death signal), SIGKILLs every
 * watched process still running. A PID is remembered with its start time from /proc, so a
 * process that exited and whose PID was reused is never killed.
 */
const PROGRAM = `
pids=""
reap() {
  for e in $pids; do
    pid=\${e%%:*}
    s=""
    read -r s < "/proc/$pid/stat" 2>/dev/null || continue
    set -- \${s##*) }
    [ "\${20}" = "\${e#*:}" ] && kill -9 "$pid" 2>/dev/null
  done
  exit 0
}
trap reap TERM HUP INT
while read -r op pid; do
  case $op in
    +) s=""
       if read -r s < "/proc/$pid/stat" 2>/dev/null; then set -- \${s##*) }; pids="$pids $pid:\${20}"; fi ;;
    -) n=""; for e in $pids; do [ "\${e%%:*}" = "$pid" ] || n="$n $e"; done; pids=$n ;;
  esac
done
reap
`;

/**
 * Kills a server's plugins when the server dies, whatever the way (SIGKILL included) and whatever
 * the plugin is built on (go-plugin alone does not watch its parent). One small long-lived process
 * per plugin host does it, started once (not an extra exec in front of every plugin start, as
 * `setpriv --pdeathsig` was): the host writes each plugin's PID on its stdin; the host's death
 * closes that pipe, and the reaper SIGKILLs what it watches. If the reaper itself dies it is
 * started again and told the PIDs still running.
 */
export class Reaper {
  private child: ChildProcess | undefined;
  private readonly watched = new Set<number>();
  private closed = false;

  /** False where there is no /proc or no sh: the caller falls back to setpriv per start. */
  static available(): boolean {
    return shell !== undefined && existsSync("/proc/self/stat");
  }

  /** Watches `pid`: written to the pipe before this returns, so a host killed right after still reaps it. */
  watch(pid: number): void {
    this.watched.add(pid);
    this.send(`+ ${pid}\n`);
  }

  /** The process has exited: forget it (its PID may be reused). */
  forget(pid: number): void {
    if (this.watched.delete(pid)) this.send(`- ${pid}\n`);
  }

  /** Stops the reaper; it kills what it still watches (nothing, once every plugin is closed). */
  close(): void {
    this.closed = true;
    this.child?.stdin?.end();
    this.child = undefined;
  }

  private send(line: string): void {
    const child = this.ensure();
    child?.stdin?.write(line);
  }

  private ensure(): ChildProcess | undefined {
    if (this.closed || !shell) return undefined;
    if (this.child) return this.child;
    const [file, argv] = setpriv
      ? [setpriv, ["--pdeathsig", "TERM", "--", shell, "-c", PROGRAM, REAPER_NAME]]
      : [shell, ["-c", PROGRAM, REAPER_NAME]];
    const child = spawn(file, argv, { stdio: ["pipe", "ignore", "ignore"], env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
    this.child = child;
    // The reaper must never keep the server's event loop alive.
    child.unref();
    (child.stdin as unknown as { unref?(): void } | null)?.unref?.();
    child.stdin?.on("error", () => {});
    child.once("error", () => {});
    child.once("exit", () => {
      if (this.child !== child) return;
      this.child = undefined;
      if (this.closed) return;
      // Killed by someone: a new one takes over what is still running.
      const next = this.ensure();
      for (const pid of this.watched) next?.stdin?.write(`+ ${pid}\n`);
    });
    return child;
  }
}
