import { readdirSync, readFileSync } from "node:fs";

/** Pids of every descendant of `pid`, from /proc (sshd's per-connection children call setsid). */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** Established TCP connections (as seen from this machine) whose remote end is host:port. */
export function establishedTo(host: string, port: number): number {
  const want = `${hexAddress(host)}:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  return readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[2] === want && f[3] === "01").length;
}

/** /proc/net/tcp writes IPv4 addresses as the 32-bit value in host (little-endian) order. */
function hexAddress(ip: string): string {
  return ip
    .split(".")
    .reverse()
    .map((o) => Number(o).toString(16).toUpperCase().padStart(2, "0"))
    .join("");
}
