import { Code, ManentError } from "../../../core/errors.js";
import type { Logger } from "../../../core/contract/index.js";
import type { HeaderRoute } from "../../../core/contract/index.js";
import { RouteAcl } from "./route-acl.js";
import { HaproxyRuntime, haproxyNamePattern, parseRuntimeAddress } from "./runtime-api.js";

/** A target's servers in HAProxy: `{host}` and `{name}` (its identity) of the server name template. */
export interface SlotHost {
  host: string;
  name: string;
}

/** One target's pair of slots during a rollout. */
export interface SlotPair extends SlotHost {
  live: string;
  candidate: string;
  /** The live slot ran nothing when the rollout began (a first deploy): nothing to share traffic with. */
  empty?: boolean;
}

export interface SlotTrafficConfig {
  socket: string;
  backend: string;
  /** Server name template, `{host}`, `{name}` and `{slot}` replaced. */
  server: string;
  testerBackend?: string | undefined;
  /** The ACL file of `set_header_route` (see ./route-acl.ts). */
  routeAcl?: string | undefined;
  /**
   * Session affinity (haproxy.cfg's `cookie … insert` with a cookie per server): a retiring slot's
   * servers go to maintenance rather than drain, since HAProxy goes on sending a draining server
   * the clients whose cookie names it; in maintenance they are sent to the other slot (and their
   * cookie rewritten) while the requests in flight end.
   */
  sticky?: boolean;
}

/** How often the drain wait reads `show stat`: the event it waits for has no notification. */
const drainPollMs = 100;

/**
 * Moves traffic between the two slots of every host through HAProxy's runtime API: each host has
 * one server per slot in `backend`; the candidate's servers get weight `w` and the live ones
 * `100 - w`, so the candidate's share of new connections is `w` percent whatever the number of
 * hosts. In the tester backend only one slot per host is ready at a time.
 */
export class SlotTraffic {
  private readonly api: HaproxyRuntime;

  constructor(
    private readonly config: SlotTrafficConfig,
    private readonly log: Logger,
  ) {
    this.api = new HaproxyRuntime(parseRuntimeAddress(config.socket)!);
  }

  get testerBackend(): string | undefined {
    return this.config.testerBackend;
  }

  /** The header route's ACL; undefined without param haproxy_route_acl. */
  get routeAcl(): RouteAcl | undefined {
    return this.config.routeAcl ? new RouteAcl(this.api, this.config.routeAcl) : undefined;
  }

  /** Sets (or with null removes) the header route; a no-op without the ACL param when removing. */
  async setHeaderRoute(route: HeaderRoute | null, signal?: AbortSignal): Promise<void> {
    const acl = this.routeAcl;
    if (acl) await acl.set(route, signal);
    else if (route) throw new ManentError(Code.FailedPrecondition, "remote-copy: set_header_route needs param haproxy_route_acl");
  }

  serverName(h: SlotHost, slot: string): string {
    const name = this.config.server.replaceAll("{host}", h.host).replaceAll("{name}", h.name).replaceAll("{slot}", slot);
    if (!haproxyNamePattern.test(name)) {
      throw new ManentError(
        Code.InvalidArgument,
        `remote-copy: param haproxy_server: "${name}" (target ${h.name}, slot ${slot}) is not a valid HAProxy server name`,
        {
          details: { plugin: "remote-copy", param: "haproxy_server" },
        },
      );
    }
    return name;
  }

  /**
   * Sets the candidates' weight to `weight` and the live servers' to `100 - weight`. Every weight
   * that goes up is set before any that goes down, so the backend never has all weights at 0
   * (HAProxy would answer 503) while traffic moves. A host whose live slot ran nothing when the
   * rollout began sends everything to the candidate from the first weight above 0.
   */
  async setCandidateWeight(pairs: SlotPair[], weight: number, signal?: AbortSignal): Promise<void> {
    const wanted: { server: string; weight: number }[] = [];
    for (const p of pairs) {
      const w = p.empty && weight > 0 ? 100 : weight;
      wanted.push({ server: this.serverName(p, p.candidate), weight: w });
      wanted.push({ server: this.serverName(p, p.live), weight: 100 - w });
    }
    const now = await Promise.all(wanted.map((w) => this.api.weight(this.config.backend, w.server, signal)));
    const changes = wanted.map((w, i) => ({ ...w, from: now[i]! })).filter((c) => c.weight !== c.from);
    const order = [...changes.filter((c) => c.weight > c.from), ...changes.filter((c) => c.weight < c.from)];
    for (const c of order) await this.api.set(`set server ${this.config.backend}/${c.server} weight ${c.weight}`, signal);
    this.log.info("haproxy weights set", { backend: this.config.backend, candidate_weight: weight, servers: order.length });
  }

  /** The candidate's share of the first host's weights, in percent. */
  async candidateWeight(pair: SlotPair, signal?: AbortSignal): Promise<number> {
    const c = await this.api.weight(this.config.backend, this.serverName(pair, pair.candidate), signal);
    const l = await this.api.weight(this.config.backend, this.serverName(pair, pair.live), signal);
    return c + l === 0 ? 0 : Math.round((100 * c) / (c + l));
  }

  /** Takes a slot's servers out of both backends' rotation while it is (re)started. */
  async quiesce(h: SlotHost, slot: string, signal?: AbortSignal): Promise<void> {
    const server = this.serverName(h, slot);
    await this.api.set(`set server ${this.config.backend}/${server} weight 0`, signal);
    if (this.config.testerBackend) await this.api.set(`set server ${this.config.testerBackend}/${server} state maint`, signal);
  }

  /** Makes a (re)started slot's server eligible again in the main backend, at its current weight. */
  async ready(h: SlotHost, slot: string, signal?: AbortSignal): Promise<void> {
    await this.api.set(`set server ${this.config.backend}/${this.serverName(h, slot)} state ready`, signal);
  }

  /** Testers to `slot` of each host: ready first, then the other slot drained, so testers are never left without a server. */
  async testersTo(hosts: (SlotHost & { to: string; from: string })[], signal?: AbortSignal): Promise<void> {
    const backend = this.config.testerBackend;
    if (!backend) return;
    for (const h of hosts) await this.api.set(`set server ${backend}/${this.serverName(h, h.to)} state ready`, signal);
    for (const h of hosts) await this.api.set(`set server ${backend}/${this.serverName(h, h.from)} state drain`, signal);
  }

  /**
   * Drains a slot's servers in both backends (maintenance with session affinity, see `sticky`) and waits until HAProxy has no session left on them
   * (`scur` 0 in `show stat`), at most `timeoutMs`; then the slot can stop without failing a request.
   * Returns false when connections were still open at the deadline.
   */
  async drain(hosts: (SlotHost & { slot: string })[], timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const servers = hosts.map((h) => this.serverName(h, h.slot));
    const backends = [this.config.backend, ...(this.config.testerBackend ? [this.config.testerBackend] : [])];
    const state = this.config.sticky ? "maint" : "drain";
    for (const b of backends) for (const s of servers) await this.api.set(`set server ${b}/${s} state ${state}`, signal);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const stats = await this.api.serverStats(signal);
      const busy = stats.filter((s) => backends.includes(s.backend) && servers.includes(s.server) && s.scur > 0);
      if (busy.length === 0) return true;
      if (Date.now() >= deadline) {
        this.log.warn("connections still open after drain_timeout; stopping the slot anyway", {
          servers: busy.map((s) => `${s.backend}/${s.server}=${s.scur}`),
        });
        return false;
      }
      await new Promise((r) => setTimeout(r, drainPollMs));
    }
  }

  /** Puts stopped slots' servers in maintenance in both backends. */
  async maint(hosts: (SlotHost & { slot: string })[], signal?: AbortSignal): Promise<void> {
    const backends = [this.config.backend, ...(this.config.testerBackend ? [this.config.testerBackend] : [])];
    for (const b of backends)
      for (const h of hosts) await this.api.set(`set server ${b}/${this.serverName(h, h.slot)} state maint`, signal);
  }

  /** Dry-run: the API answers and every server exists. Returns each target's problems, by its name. */
  async check(hosts: (SlotHost & { slots: string[] })[], signal?: AbortSignal): Promise<Map<string, string[]>> {
    const stats = await this.api.serverStats(signal);
    const problems = new Map<string, string[]>();
    const backends = [this.config.backend, ...(this.config.testerBackend ? [this.config.testerBackend] : [])];
    for (const b of backends)
      for (const h of hosts)
        for (const slot of h.slots) {
          const server = this.serverName(h, slot);
          if (!stats.some((s) => s.backend === b && s.server === server))
            problems.set(h.name, [...(problems.get(h.name) ?? []), `server ${b}/${server} not found`]);
        }
    return problems;
  }

  describe(): string {
    return this.api.describe();
  }
}
