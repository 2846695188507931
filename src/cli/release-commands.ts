import type { Command, Option } from "commander";
import type { ReleaseRecord } from "../core/release/release-store.js";
import type { ApiClient } from "./api-client.js";
import { Exit } from "./exit-codes.js";
import type { Painter } from "./output/colour.js";
import { isDocument, outputOf, printedAsDocument, type Output } from "./output/output-format.js";
import { tableLines } from "./output/table.js";

const out = (line: string): void => void process.stdout.write(`${line}\n`);

export interface ReleaseCommandDeps {
  client: () => Promise<ApiClient>;
  output: () => Option;
  readDescriptor: (file: string) => Promise<Record<string, unknown>>;
  absoluteSource: (source: string, base: string) => Promise<string>;
  /** Colours for a stream (off with NO_COLOR, --no-color, or when it is not a terminal). */
  colours: (stream: NodeJS.WriteStream) => Painter;
}

/**
 * `manent release start|status|list|cancel|approve|promote|retry`: one artifact, pinned by sha256,
 * through the stages of the application's pipeline.yml, as one durable workflow on the server.
 */
export function releaseCommands(program: Command, deps: ReleaseCommandDeps): void {
  const { client, output } = deps;
  const release = program
    .command("release")
    .description("move one artifact through the environments of its application's pipeline.yml (dev, staging, prod…)");

  release
    .command("start")
    .description("start a release of what a descriptor describes, and follow it until it ends or waits for a person")
    .requiredOption("-f, --file <descriptor>", "the descriptor (apiVersion: manent/v1); its environment is not used")
    .option("--version <version>", "release this version instead of the descriptor's")
    .option(
      "--source <source>",
      "take the artifact from here instead: a local file (uploaded), an http(s) URL or a file:// path on the server",
    )
    .option("--sha256 <hex>", "expected sha256 of the artifact")
    .option("--no-wait", "print the release id and return at once")
    .addOption(output())
    .action(async (o: { file: string; version?: string; source?: string; sha256?: string; wait: boolean; output?: Output }) => {
      const descriptor = await deps.readDescriptor(o.file);
      const { artifactOverrides } = await import("./local-artifact.js");
      const overrides = await artifactOverrides(client, descriptor, o.file, o, deps.absoluteSource);
      const api = await client();
      const { id } = await api.startRelease({ descriptor, descriptor_file: o.file, overrides });
      if (!o.wait) {
        if (await printedAsDocument(await api.release(id), o.output)) return;
        return out(id);
      }
      await follow(api, id, outputOf(o.output), false);
    });

  release
    .command("status")
    .description("show a release: its stages, their deploys, soaks, approvals and what it waits for")
    .argument("<id>", "release id")
    .option(
      "-w, --watch",
      "follow it to its end (through soaks, promotions and approvals): redrawn in place on a terminal, one line per change in a pipe",
    )
    .addOption(output())
    .action(async (id: string, o: { watch?: boolean; output?: Output }) => {
      const api = await client();
      if (o.watch) return watch(api, id, outputOf(o.output), deps.colours);
      const r = await api.release(id);
      if (!(await printedAsDocument(r, o.output))) printRelease(r);
      process.exitCode = exitFor(r);
    });

  release
    .command("list")
    .description("list releases, newest first")
    .option("--tenant <tenant>", "only this tenant's releases")
    .option("--application <application>", "only this application's releases")
    .option("--status <status>", "only releases in this status (running, succeeded, failed, cancelled)")
    .option("--limit <n>", "how many", "20")
    .addOption(output())
    .action(async (o: { tenant?: string; application?: string; status?: string; limit: string; output?: Output }) => {
      const { releases } = await (
        await client()
      ).releases({ tenant: o.tenant, application: o.application, status: o.status, limit: o.limit });
      if (await printedAsDocument(releases, o.output)) return;
      const rows = [["CREATED", "ID", "APPLICATION", "VERSION", "STAGE", "STATUS"]];
      for (const r of releases) {
        const at = r.current_stage === null ? "-" : `${r.current_stage}`;
        rows.push([r.created_at, r.id, r.application, r.version, at, r.waiting ? `${r.status} (${r.waiting.kind})` : r.status]);
      }
      for (const line of tableLines(rows)) out(line);
    });

  release
    .command("cancel")
    .description("cancel a release: the deploy it runs is cancelled too, and later environments are not touched")
    .argument("<id>", "release id")
    .addOption(output())
    .action(async (id: string, o: { output?: Output }) => {
      const r = await (await client()).releaseCommand(id, "cancel");
      if (await printedAsDocument(r, o.output)) return;
      out(`${r.id} cancel requested: ${r.message ?? ""}`);
    });

  release
    .command("approve")
    .description("approve the stage a release waits at (the pipeline's approvers rules apply)")
    .argument("<id>", "release id")
    .addOption(output())
    .action(async (id: string, o: { output?: Output }) => {
      const r = await (await client()).releaseCommand(id, "approve");
      if (await printedAsDocument(r, o.output)) return;
      out(`${r.id} approve sent for stage ${r.waiting?.stage ?? r.current_stage ?? "-"}`);
    });

  release
    .command("promote")
    .description("promote a release waiting at a manual stage into that stage's environment")
    .argument("<id>", "release id")
    .requiredOption("--to <environment>", "the environment to promote to (one of the stage the release waits at)")
    .addOption(output())
    .action(async (id: string, o: { to: string; output?: Output }) => {
      const r = await (await client()).releaseCommand(id, "promote", o.to);
      if (await printedAsDocument(r, o.output)) return;
      out(`${r.id} promoted to ${o.to}`);
    });

  release
    .command("retry")
    .description(
      "retry a failed or cancelled release: a new release of the same artifact (same sha256) through the pipeline it recorded, " +
        "from the stage where it stopped (the stages it passed are not deployed again), and follow it",
    )
    .argument("<id>", "the release to retry")
    .option("--no-wait", "print the new release's id and return at once")
    .addOption(output())
    .action(async (id: string, o: { wait: boolean; output?: Output }) => {
      const api = await client();
      const started = await api.retryRelease(id);
      if (!o.wait) {
        if (await printedAsDocument(await api.release(started.id), o.output)) return;
        return out(started.id);
      }
      await follow(api, started.id, outputOf(o.output), false);
    });
}

/**
 * Follows a release on its event stream, printing its summary once it ends, or (with
 * `throughWaits` false) until it waits for a person, whose command it prints.
 */
async function follow(api: ApiClient, id: string, output: Output, throughWaits: boolean): Promise<void> {
  const { terminalReleaseStatuses } = await import("../core/release/release-store.js");
  let r = await api.release(id);
  const waitsForPerson = (x: ReleaseRecord) => x.waiting?.kind === "promotion" || x.waiting?.kind === "approval";
  const done = (x: ReleaseRecord) => terminalReleaseStatuses.has(x.status) || (!throughWaits && waitsForPerson(x));
  if (!done(r)) {
    await api.streamEvents(
      `/api/v1/releases/${encodeURIComponent(id)}/events`,
      (e) => {
        if (e.type === "release.updated") {
          r = { ...r, ...(e.data as Partial<ReleaseRecord>) };
        } else if (e.type === "release.status") r = { ...r, ...(e.data as Partial<ReleaseRecord>) };
        return done(r);
      },
      { after: 0 },
    );
    r = await api.release(id);
  }
  if (!(await printedAsDocument(r, output))) printRelease(r);
  process.exitCode = exitFor(r);
}

/**
 * `manent release status ID --watch`: on a terminal, the release's view redrawn in place at each
 * event (and each second of a soak, for its time left); in a pipe (`-o text`), one line per change,
 * then its status; with a document output, the document once it ends (the view on stderr if a terminal).
 */
async function watch(api: ApiClient, id: string, output: Output, colours: (s: NodeJS.WriteStream) => Painter): Promise<void> {
  const [{ terminalReleaseStatuses }, { ReleaseTimeline, releaseView }] = await Promise.all([
    import("../core/release/release-store.js"),
    import("./release-view.js"),
  ]);
  const stream = isDocument(output) ? (process.stderr.isTTY ? process.stderr : undefined) : process.stdout;
  let r = await api.release(id);
  const live = stream?.isTTY ? new (await import("./live-view.js")).LiveView(stream, colours(stream)) : undefined;
  const timeline = stream && !live ? new ReleaseTimeline((line) => void stream.write(`${line}\n`)) : undefined;
  const paint = stream ? colours(stream) : undefined;
  const show = () => (live ? live.redraw(releaseView(r, paint)) : timeline?.update(r));
  let ticker: ReturnType<typeof setInterval> | undefined;
  const tick = () => {
    // The soak's time left counts down on screen; no timer otherwise.
    if (live && r.waiting?.kind === "soak") ticker ??= setInterval(show, 1000);
    else if (ticker) ticker = void clearInterval(ticker);
  };
  try {
    if (!terminalReleaseStatuses.has(r.status)) {
      show();
      tick();
      await api.streamEvents(
        `/api/v1/releases/${encodeURIComponent(id)}/events`,
        (e) => {
          if (e.type === "release.updated" || e.type === "release.status") r = { ...r, ...(e.data as Partial<ReleaseRecord>) };
          show();
          tick();
          return terminalReleaseStatuses.has(r.status);
        },
        { after: 0 },
      );
      r = await api.release(id);
    }
  } finally {
    clearInterval(ticker);
  }
  if (live) {
    const last = r.error && r.status !== "succeeded" ? `${paint!.status(r.status)}: ${r.error.message}` : paint!.status(r.status);
    live.end([...releaseView(r, paint), "", last]);
  } else timeline?.finish(r);
  if (isDocument(output)) await printedAsDocument(r, output);
  process.exitCode = exitFor(r);
}

function exitFor(r: ReleaseRecord): number {
  return r.status === "failed" || r.status === "cancelled" ? Exit.DeployFailed : Exit.Ok;
}

function printRelease(r: ReleaseRecord): void {
  out(`release ${r.id}: ${r.application} ${r.version} (${r.artifact}) ${r.status}${r.retry_of ? ` (retry of ${r.retry_of})` : ""}`);
  out(`sha256 ${r.sha256 ?? "(not pinned yet)"}; started by ${r.submitted_by ?? "-"} at ${r.created_at}; pipeline ${r.pipeline_file}`);
  for (const s of r.stages) {
    const deploys = s.deploys.map((d) => `${d.environment} ${d.deploy_id} ${d.status}`).join(", ");
    const notes = [
      s.done_by && `done by release ${s.done_by}`,
      s.promoted_by && `promoted by ${s.promoted_by}`,
      s.approvals.length > 0 && `approved by ${s.approvals.map((a) => a.by).join(", ")}`,
      s.soak_until && `soak until ${s.soak_until}`,
      s.measurements.length > 0 && `${s.measurements.length} measurements`,
    ].filter(Boolean);
    out(
      `  ${s.index}. ${s.environments.join(", ")}: ${s.status}${deploys ? ` [${deploys}]` : ""}${notes.length ? ` (${notes.join("; ")})` : ""}`,
    );
    if (s.message) out(`     ${s.message}`);
  }
  if (r.waiting) out(r.waiting.hint);
  if (r.retried_by?.length) out(`retried by ${r.retried_by.join(", ")}`);
  if (r.error && r.status !== "succeeded") out(`error: ${r.error.message}`);
}
