/**
 * Issue 13's table, measured on this machine in one run: every bench runs as a child process, one
 * after the other (so they do not skew each other), with `--json`; the table reads the JSON object on
 * the last line of each one's stdout and prints `what | now (measured) | aim | met?`, the Go host's
 * figures beside the TS host's. Also issue 9's 10,000-target rollout, issue 11's resume after kill and
 * issue 24's Kubernetes apply of 200 objects beside kubectl.
 * Each bench's own output goes to stderr as it runs, so a long run shows where it is.
 *
 * Run: node --import tsx bench/table.ts [--quick] [--only ROW,ROW] [--json]
 *   --quick   smaller counts (fewer runs, 1,000 deploys for memory): a rough table in a few minutes
 *   --only    rows by id: deploy, roundtrip, secret, coldstart, help, status, memory, rollout, resume, kubeapply, and
 *             issue 24's envconfig, envconfig_memory, throughput, streams, soak
 *   --json    the figures and verdicts as one JSON object on the last stdout line
 * Rows whose bench failed or does not report the figure say so (and the exit code is 1).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { othersWarnPct } from "./support/machine-share.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values: opts } = parseArgs({
  options: { quick: { type: "boolean", default: false }, only: { type: "string" }, json: { type: "boolean", default: false } },
});
const quick = opts.quick;

type Figures = Record<string, unknown>;
interface Bench {
  /** How to run it (from the repository's root), `--json` included. */
  command: string[];
  file: string;
}
const tsx = (file: string, ...args: string[]): Bench => ({ command: [process.execPath, "--import", "tsx", file, ...args, "--json"], file });
const benches = {
  engine: tsx("bench/engine-overhead.ts", quick ? "5" : "20"),
  externalTs: tsx("bench/external-ts.ts", quick ? "5" : "15", quick ? "300" : "1000"),
  externalGo: {
    command: ["bash", "bench/external-go.sh", "-starts", quick ? "5" : "15", "-deploys", quick ? "300" : "1000", "-json"],
    file: "bench/external-go.sh",
  },
  cli: tsx("bench/cli-start.ts", quick ? "5" : "15"),
  memory: tsx("bench/memory.ts", "--deploys", quick ? "1000" : "10000"),
  rollouts: tsx("bench/rollouts.ts", quick ? "1" : "3"),
  resume: tsx("bench/resume-after-kill.ts"),
  kubeApply: tsx("bench/kubernetes-apply.ts", quick ? "2" : "3"),
  largeEnvconfig: tsx("bench/large-envconfig.ts", "--runs", quick ? "2" : "3"),
  // Side by side with the last commit whose event appends took one advisory lock for the whole database.
  throughput: tsx("bench/throughput.ts", "--seconds", quick ? "10" : "20", "--ref", "3acb6f9"),
  streams: tsx("bench/sse-capacity.ts", "--seconds", quick ? "10" : "30"),
  soak: tsx("bench/soak.ts", "--minutes", quick ? "3" : "30", "--sample", quick ? "30" : "120"),
} satisfies Record<string, Bench>;
type BenchName = keyof typeof benches;

/** A figure, or why there is none. */
type Got = { value: number } | { missing: string };
interface Row {
  id: string;
  what: string;
  aim: string;
  benches: BenchName[];
  /** The measured text and whether the aim is met (undefined: no aim, or not measured). */
  judge(get: (bench: BenchName, key: string) => Got): { now: string; met?: boolean };
}

const num = (g: Got): number | undefined => ("value" in g ? g.value : undefined);
const why = (...gs: Got[]): string => gs.flatMap((g) => ("missing" in g ? [g.missing] : [])).join("; ");
const f1 = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** TS host against Go host, as "TS x ms vs Go y ms: r×", met when r is at most `bound`. */
function versus(ts: Got, go: Got, bound: number): { now: string; met?: boolean } {
  const [t, g] = [num(ts), num(go)];
  if (t === undefined || g === undefined)
    return {
      now: `${t === undefined ? "TS host ?" : `TS host ${f1(t)} ms`} vs ${g === undefined ? "Go host ?" : `Go host ${f1(g)} ms`} (${why(ts, go)})`,
    };
  const r = t / g;
  return { now: `TS host ${f1(t)} ms vs Go host ${f1(g)} ms: ${r.toFixed(2)}×`, met: r <= bound };
}

/** One figure against a bound, e.g. `≤ 50 ms`. */
function atMost(g: Got, bound: number, unit: string, extra = ""): { now: string; met?: boolean } {
  const v = num(g);
  return v === undefined ? { now: `not measured (${why(g)})` } : { now: `${f1(v)} ${unit}${extra}`, met: v <= bound };
}

const rows: Row[] = [
  {
    id: "deploy",
    what: "one no-op deploy, submit → finished (median)",
    aim: "≤ 50 ms",
    benches: ["engine"],
    judge: (get) => {
      const steps = num(get("engine", "deploy_steps_ms_p50"));
      return atMost(
        get("engine", "deploy_submit_to_finished_ms_p50"),
        50,
        "ms",
        steps === undefined ? "" : ` (steps alone ${f1(steps)} ms)`,
      );
    },
  },
  {
    id: "roundtrip",
    what: "no-op Deploy round trip with the Secrets broker, Go sample plugin (median)",
    aim: "≤ 1.5× the Go host",
    benches: ["externalTs", "externalGo"],
    judge: (get) => versus(get("externalTs", "go_sample.deploy_rtt_ms_p50"), get("externalGo", "go_sample.deploy_secrets_rtt_ms_p50"), 1.5),
  },
  {
    id: "secret",
    what: "a secret looked up through the broker from inside a Deploy (p50, TS host)",
    aim: "≤ 1 ms",
    benches: ["externalTs"],
    judge: (get) => atMost(get("externalTs", "go_sample.secret_lookup_ms_p50"), 1, "ms"),
  },
  {
    id: "coldstart",
    what: "cold start to first Configure, Go sample plugin (median)",
    aim: "≤ 1.2× the Go host",
    benches: ["externalTs", "externalGo"],
    judge: (get) => versus(get("externalTs", "go_sample.cold_start_ms_p50"), get("externalGo", "go_sample.cold_start_ms_p50"), 1.2),
  },
  {
    id: "help",
    what: "`manent --help`, whole process (median)",
    aim: "≤ 150 ms",
    benches: ["cli"],
    judge: (get) => {
      const node = num(get("cli", "node.median"));
      return atMost(get("cli", "help.median"), 150, "ms", node === undefined ? "" : ` (\`node -e 0\` ${f1(node)} ms)`);
    },
  },
  {
    id: "status",
    what: "`manent status ID`, server down, whole process (median)",
    aim: "≤ 200 ms",
    benches: ["cli"],
    judge: (get) => atMost(get("cli", "status_server_down.median"), 200, "ms"),
  },
  {
    id: "memory",
    what: "manent-server RSS over sequential no-op deploys (2 targets each)",
    aim: "flat: ≤ +10%",
    benches: ["memory"],
    judge: (get) => {
      const [idle, end, pct, n, heapIdle, heapEnd] = [
        "rss_idle_mb",
        "rss_end_mb",
        "rss_growth_pct",
        "deploys",
        "heap_used_idle_mb",
        "heap_used_end_mb",
      ].map((k) => get("memory", k));
      const [i, e, p, d] = [idle!, end!, pct!, n!].map(num);
      if (i === undefined || e === undefined || p === undefined || d === undefined)
        return { now: `not measured (${why(idle!, end!, pct!, n!)})` };
      const max = num(get("memory", "rss_max_mb"));
      const inRun =
        max === undefined ? "" : `; in the run at most ${max} MB (${max >= i ? "+" : ""}${Math.round(((max - i) / i) * 1000) / 10}%)`;
      const half = num(get("memory", "rss_growth_second_half_pct"));
      const from = num(get("memory", "rss_mid_deploys"));
      const second =
        half === undefined || from === undefined
          ? ""
          : `; ${half >= 0 ? "+" : ""}${half}% from ${from.toLocaleString("en")} deploys to the last`;
      const heap = num(heapIdle!) !== undefined && num(heapEnd!) !== undefined ? `; live heap ${num(heapIdle!)} → ${num(heapEnd!)} MB` : "";
      return {
        now: `${i} MB idle → ${e} MB after ${d.toLocaleString("en")} deploys and idle (${p >= 0 ? "+" : ""}${p}%${second}${inRun})${heap}`,
        met: p <= 10,
      };
    },
  },
  {
    id: "rollout",
    what: "issue 9: 10,000 no-op targets in 10 waves, submit → finished",
    aim: "< 10 s",
    benches: ["rollouts"],
    judge: (get) => {
      const v = num(get("rollouts", "waves_10000_ms"));
      return v === undefined
        ? { now: `not measured (${why(get("rollouts", "waves_10000_ms"))})` }
        : { now: `${(v / 1000).toFixed(1)} s`, met: v < 10_000 };
    },
  },
  {
    id: "resume",
    what: "issue 11: `kill -9` with 50 deploys in flight, ready → every deploy's next step",
    aim: "(none set)",
    benches: ["resume"],
    judge: (get) => {
      const ready = num(get("resume", "ready_ms"));
      const median = num(get("resume", "next_step_ms_p50"));
      const all = get("resume", "all_resumed_ms");
      const a = num(all);
      if (a === undefined) return { now: `not measured (${why(all)})` };
      const beside = [
        median === undefined ? "" : `median ${f1(median)} ms`,
        ready === undefined ? "" : `restart to ready ${f1(ready)} ms`,
      ].filter(Boolean);
      return { now: `${f1(a)} ms to the last deploy's next step${beside.length ? ` (${beside.join("; ")})` : ""}` };
    },
  },
  {
    id: "kubeapply",
    what: "issue 24: update of 200 Kubernetes objects + 50 rollouts, manent beside `kubectl apply --server-side` + `kubectl rollout status` (median)",
    aim: "≤ 2× kubectl",
    benches: ["kubeApply"],
    judge: (get) => {
      const [m, k] = [get("kubeApply", "update_ms_p50"), get("kubeApply", "kubectl_update_ms_p50")];
      const [mv, kv] = [num(m), num(k)];
      if (mv === undefined || kv === undefined) return { now: `not measured (${why(m, k)})` };
      return {
        now: `manent ${(mv / 1000).toFixed(1)} s vs kubectl ${(kv / 1000).toFixed(1)} s: ${(mv / kv).toFixed(2)}×`,
        met: mv / kv <= 2,
      };
    },
  },
  {
    id: "envconfig",
    what: "issue 24: a 20,000-target envconfig submitted right after it changed (so parsed, not from the server's cache), POST answered (median)",
    aim: "≤ 1 s",
    benches: ["largeEnvconfig"],
    judge: (get) => {
      const n = (k: string) => num(get("largeEnvconfig", k)) ?? "?";
      return atMost(
        get("largeEnvconfig", "submit_ms_p50"),
        1000,
        "ms",
        ` (the server's first: ${n("first_submit_ms")} ms; an unchanged file again: ${n("repeat_submit_ms")} ms; ` +
          `submit → finished ${n("submit_to_finished_ms_p50")} ms; the parse and validation alone ${n("read_validate_ms_p50")} ms)`,
      );
    },
  },
  {
    id: "envconfig_memory",
    what: "issue 24: the server's peak RSS over its RSS before, until the POST of its first 20,000-target envconfig is answered (a fresh heap: later ones reuse the heap it grew)",
    aim: "≤ 30 MB",
    benches: ["largeEnvconfig"],
    judge: (get) => {
      const n = (k: string) => num(get("largeEnvconfig", k)) ?? "?";
      return atMost(
        get("largeEnvconfig", "first_answer_rss_peak_delta_mb"),
        30,
        "MB",
        ` (median of the submissions after a change: +${n("answer_rss_peak_delta_mb_p50")} MB; heap the parse and validation allocate: ` +
          `${n("read_validate_heap_mb_p50")} MB; until the deploy of 20,000 targets finished: +${n("rss_peak_delta_mb_p50")} MB)`,
      );
    },
  },
  {
    id: "throughput",
    what: "issue 24: no-op deploys/s with 100 applications deploying at once, 1 / 2 / 3 servers on one Postgres",
    aim: "the limit is Postgres's commits, not a lock of ours",
    benches: ["throughput"],
    judge: (get) => {
      const cell = (k: string) => {
        const [d, c, w, before] = [
          num(get("throughput", `fleets.${k}.deploys_per_s`)),
          num(get("throughput", `fleets.${k}.xact_commit_per_deploy`)),
          num(get("throughput", `fleets.${k}.advisory_lock_waiters_mean`)),
          num(get("throughput", `fleets.${k}_ref.deploys_per_s`)),
        ];
        return d === undefined
          ? "?"
          : `${d}/s (${c} commits/deploy, ${w} waiting on an advisory lock; ${before ?? "?"}/s with the append lock, 3acb6f9)`;
      };
      return { now: ["1_server", "2_servers", "3_servers"].map(cell).join("; ") };
    },
  },
  {
    id: "streams",
    what: "issue 24: 1,000 SSE streams held, 200 clients reconnecting each second: opens within 1 s",
    aim: "≥ 99 %",
    benches: ["streams"],
    judge: (get) => {
      const [held, again, kb] = [
        num(get("streams", "held_open_within_1s_pct")),
        get("streams", "reconnect_open_within_1s_pct"),
        num(get("streams", "kb_per_held_stream")),
      ];
      const r = num(again);
      return r === undefined
        ? { now: `not measured (${why(again)})` }
        : {
            now: `reconnections ${r}% (held streams' first open ${held ?? "?"}%); ${kb ?? "?"} KB of RSS per held stream`,
            met: r >= 99 && (held ?? 0) >= 99,
          };
    },
  },
  {
    id: "soak",
    what: "issue 24: RSS over the soak's mixed workload, after warm-up → end (both after a full GC; live heap beside)",
    aim: "flat",
    benches: ["soak"],
    judge: (get) => {
      const [m, w, e, p, hw, he] = [
        "minutes",
        "rss_mb_after_warmup",
        "rss_mb_end",
        "rss_growth_after_warmup_pct",
        "heap_live_mb_after_warmup",
        "heap_live_mb_end",
      ].map((k) => num(get("soak", k)));
      return w === undefined
        ? { now: `not measured (${why(get("soak", "rss_mb_after_warmup"))})` }
        : { now: `${w} → ${e} MB (${p}%) over ${m} min; live heap ${hw} → ${he} MB` };
    },
  },
];

const only = opts.only?.split(",").map((s) => s.trim());
const unknown = only?.filter((id) => !rows.some((r) => r.id === id));
if (unknown?.length) {
  console.error(`unknown row(s): ${unknown.join(", ")}; rows: ${rows.map((r) => r.id).join(", ")}`);
  process.exit(2);
}
const chosen = rows.filter((r) => !only || only.includes(r.id));

/** Runs a bench with its output shown on stderr; resolves with its last stdout line parsed, or why not. */
async function run(bench: Bench): Promise<Figures | string> {
  if (!existsSync(path.join(root, bench.file))) return `${bench.file} does not exist yet`;
  process.stderr.write(`\n$ ${bench.command.map((a) => (a === process.execPath ? "node" : a)).join(" ")}\n`);
  const child = spawn(bench.command[0]!, bench.command.slice(1), { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
    process.stderr.write(d);
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const last = out.trimEnd().split("\n").at(-1) ?? "";
  if (code !== 0) return `${bench.file} exited ${code}`;
  try {
    const parsed = JSON.parse(last) as unknown;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Figures;
  } catch {
    // falls through
  }
  return `${bench.file} printed no JSON object last (does it take --json yet?)`;
}

const results = new Map<BenchName, Figures | string>();
for (const name of [...new Set(chosen.flatMap((r) => r.benches))]) results.set(name, await run(benches[name]));

const get = (bench: BenchName, key: string): Got => {
  const r = results.get(bench);
  if (typeof r === "string" || r === undefined) return { missing: r ?? `${bench} not run` };
  const v = key.split(".").reduce<unknown>((o, k) => (o && typeof o === "object" ? (o as Record<string, unknown>)[k] : undefined), r);
  return typeof v === "number" && Number.isFinite(v) ? { value: v } : { missing: `${benches[bench].file} reports no ${key}` };
};

const table = chosen.map((r) => ({ id: r.id, what: r.what, aim: r.aim, ...r.judge(get) }));
const cell = (s: string): string => s.replaceAll("|", "\\|");
console.log(`\nissue 13's table on ${(await import("node:os")).hostname()}, ${new Date().toISOString()}${quick ? " (--quick)" : ""}:\n`);
console.log("| what | now (measured) | aim | met? |");
console.log("|---|---|---|---|");
for (const r of table)
  console.log(`| ${cell(r.what)} | ${cell(r.now)} | ${cell(r.aim)} | ${r.met === undefined ? "—" : r.met ? "yes" : "no"} |`);
// Each bench says what share of the CPUs went to other programs while it ran (support/machine-share.ts).
const shared = [...results].flatMap(([name, r]) =>
  typeof r === "object" && typeof r.others_cpu_pct === "number" && r.others_cpu_pct > othersWarnPct
    ? [`${benches[name].file} (${r.others_cpu_pct}%)`]
    : [],
);
if (shared.length)
  console.log(
    `\nwarning: other programs took a share of the CPUs while these ran, so their figures are not their own: ${shared.join(", ")}`,
  );
if (opts.json) console.log(JSON.stringify({ bench: "table", quick, rows: table, figures: Object.fromEntries(results) }));
process.exitCode = [...results.values()].some((r) => typeof r === "string") ? 1 : 0;
