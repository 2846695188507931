import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { Code, ManentError } from "../../src/core/errors.js";
import { deployReaching } from "../support/deploy-wait.js";
import { runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { readJournal } from "../support/journal.js";
import { TestPostgres } from "../support/postgres.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
/** One API token per person: principal ids `token:<name>` tell them apart. */
const people = { alice: "sod-alice-token-0001", bob: "sod-bob-token-0002", carol: "sod-carol-token-0003", dave: "sod-dave-token-0004" };
type Person = keyof typeof people;

/**
 * Separation of duties at approval steps and gates (envconfig `approval.approvers`), through the
 * real server, API and CLI: the submitter refused on its own deploy, an approver outside the named
 * group refused, distinct approvers counted once each, a promote counted as an approval, `promote
 * --full` stopping at such an approval, what status shows, the refusals in the audit log, and
 * approvals kept across a server killed between two. Tokens stand for people (their groups from
 * manent.yml), as people signed in with OpenID Connect would with their groups claim.
 */
describe("approvers: separation of duties", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let config: string;
  let server: ServerProcess;
  let artifact: string;

  const api = (who: Person, s = server) => new ApiClient(s.url, people[who]);
  const cli = (who: Person, ...args: string[]) =>
    runCli(args, { cwd: ws.dir, server: server.url, token: people[who], env: { MANENT_OUTPUT: "text" } });
  const start = async (who: Person, app: string, rollout: Record<string, unknown>, s = server) => {
    await ws.write(`envconfig/untenanted/${app}/${app}/prod.yml`, {
      plugin: "noop",
      targets: [{ host: `${app}-1` }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout,
    });
    return (await api(who, s).submit({ descriptor: descriptor(app, "prod", artifact, "2.0.0"), descriptor_file: `${app}.yml` })).id;
  };
  const until = (id: string, ok: (d: DeployRecord) => boolean, what: string, s = server) =>
    deployReaching(api("alice", s), id, ok, what, 30_000);
  const approvedBy = (n: number) => (d: DeployRecord) =>
    d.rollout?.waiting?.kind === "approval" && (d.rollout.approvals ?? []).length === n;
  const refusal = async (p: Promise<unknown>): Promise<ManentError> => {
    const err = await p.then(
      () => assert.fail("not refused"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ManentError, String(err));
    return err;
  };
  const fourEyes = { count: 2, from_groups: ["release-managers"], allow_submitter: false };
  const rm = { role: "approver", groups: ["release-managers"] };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "four eyes\n");
    // alice may do everything and is a release manager (she submits); so are bob and carol; dave may approve, in no group.
    const roles = { alice: { ...rm, role: "admin" }, bob: rm, carol: rm, dave: { role: "approver" } };
    const tokens = Object.entries(people).map(([name, token]) => ({ name, tenant: "*", sha256: sha(token), ...roles[name as Person] }));
    config = await ws.write("manent.yml", manentYml(await pg.createDatabase(), { auth: { tokens } }));
    server = await startServer(config, { cwd: ws.dir });
  });
  after(async () => {
    await server?.stop();
    await pg?.stop();
  });

  it("refuses the submitter and an approver outside the group, counts each approver once, and goes on after two distinct ones", async () => {
    const id = await start("alice", "eyes", {
      canary: { steps: [{ set_weight: 10 }, { approval: { approvers: fourEyes } }, { set_weight: 100 }] },
    });
    const waiting = await until(id, approvedBy(0), "waiting for approval");
    assert.deepEqual(waiting.rollout!.waiting!.approvers, {
      count: 2,
      from_groups: ["release-managers"],
      allow_submitter: false,
      explicit: true,
    });
    assert.equal(
      waiting.rollout!.waiting!.hint,
      `waiting for approval: manent approve ${id} (0 of 2 approvals from release-managers; the submitter may not approve)`,
    );

    // The submitter: refused, 403, naming the requirement; with the CLI as well.
    const own = await refusal(api("alice").rolloutCommand(id, "approve"));
    assert.equal(own.code, 7 /* permission_denied */);
    assert.equal(
      own.message,
      `alice may not approve deploy ${id}: alice submitted it, and the approval at canary-2:approval refuses the submitter (approvers.allow_submitter: false)`,
    );
    assert.equal(own.details?.requirement, "allow_submitter");
    const ownCli = await cli("alice", "approve", id);
    assert.notEqual(ownCli.code, 0);
    assert.match(
      ownCli.stderr,
      /alice submitted it, and the approval at canary-2:approval refuses the submitter \(approvers\.allow_submitter: false\)/,
    );
    // A plain promote during the approval is an approval too: refused the same way.
    const ownPromote = await refusal(api("alice").rolloutCommand(id, "promote"));
    assert.equal(ownPromote.details?.requirement, "allow_submitter");

    // Someone allowed to approve there, but not in the group the approval names: refused.
    const outsider = await refusal(api("dave").rolloutCommand(id, "approve"));
    assert.equal(outsider.code, 7);
    assert.equal(
      outsider.message,
      `dave may not approve deploy ${id}: the approval at canary-2:approval needs approvers from the group release-managers (approvers.from_groups), and dave is in none of them`,
    );
    assert.equal(outsider.details?.requirement, "from_groups");

    // The first approver counts once: a second approve (or promote) by bob is refused and changes nothing.
    assert.equal((await cli("bob", "approve", id)).code, 0);
    const one = await until(id, approvedBy(1), "one approval counted");
    assert.deepEqual(
      one.rollout!.approvals!.map((a) => `${a.step} ${a.by} ${a.by_id} ${a.command}`),
      ["canary-2:approval bob token:bob approve"],
    );
    assert.match(one.rollout!.waiting!.hint, /\(1 of 2 approvals from release-managers; approved by bob; the submitter may not approve\)$/);
    const again = await refusal(api("bob").rolloutCommand(id, "approve"));
    assert.equal(again.code, 6 /* already_exists */);
    assert.match(
      again.message,
      new RegExp(`^bob already approved canary-2:approval of deploy ${id} at \\S+; each approver counts once \\(1 of 2 approvals`),
    );
    await refusal(api("bob").rolloutCommand(id, "promote"));

    const status = await cli("carol", "status", id);
    assert.match(status.stdout, /✓ approved by bob at \S+ \(canary-2:approval\)/);
    assert.match(
      status.stdout,
      new RegExp(
        `⏸ waiting for approval: manent approve ${id} \\(1 of 2 approvals from release-managers; approved by bob; the submitter may not approve\\)`,
      ),
    );

    // The second distinct approver, by promote: the wait ends.
    assert.equal((await cli("carol", "promote", id)).code, 0);
    const d = await api("alice").deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(
      d.rollout!.approvals!.map((a) => `${a.by} ${a.command}`),
      ["bob approve", "carol promote"],
    );
    assert.match(d.steps.find((s) => s.name === "canary-2:approval")!.output!.result, /approve by bob, promote by carol/);
    assert.deepEqual(
      d.rollout!.commands.map((c) => `${c.command} ${c.by}`),
      ["approve bob", "promote carol"],
    );
    const final = await cli("alice", "status", id);
    assert.match(
      final.stdout,
      /✓ approved by bob at \S+ \(canary-2:approval\)\n\s+✓ approved by carol at \S+ \(canary-2:approval, by promote\)/,
    );

    // The refusals are in the audit log, with who and why.
    const audit = (await api("alice").audit({ deploy_id: id })).entries.filter((e) => e.action === "approve" || e.action === "promote");
    assert.deepEqual(audit.map((e) => `${e.actor} ${e.action} ${e.outcome}`).reverse(), [
      "alice approve permission_denied",
      "alice approve permission_denied",
      "alice promote permission_denied",
      "dave approve permission_denied",
      "bob approve ok",
      "bob approve already_exists",
      "bob promote already_exists",
      "carol promote ok",
    ]);
    assert.match(audit.find((e) => e.actor === "alice" && e.action === "approve")!.message!, /approvers\.allow_submitter: false/);
    assert.match(audit.find((e) => e.actor === "dave")!.message!, /approvers\.from_groups/);
  });

  it("counts a person once through every token: the submitter's managed tokens, one made with one of them, the CLI, and a deploy submitted with a managed token", async () => {
    const twoPeople = { count: 2, allow_submitter: false };
    const id = await start("alice", "own-tokens", { canary: { steps: [{ set_weight: 10 }, { approval: { approvers: twoPeople } }] } });
    await until(id, approvedBy(0), "waiting for approval");
    const make = async (client: ApiClient, name: string, role: string) =>
      (await client.createToken({ name, role, tenant: "*", expires_in: "1d" })).token;
    // Tokens alice made: through the API, one made with an admin token she made, one through the CLI.
    const own = await make(api("alice"), "alice-approver", "approver");
    const cased = await make(api("alice"), "alice-second", "approver");
    const chained = await make(new ApiClient(server.url, await make(api("alice"), "alice-admin", "admin")), "alice-chained", "approver");
    const made = await runCli(
      ["token", "create", "--name", "alice-cli", "--role", "approver", "--tenant", "*", "--expires", "1d", "-o", "json"],
      { cwd: ws.dir, server: server.url, token: people.alice },
    );
    assert.equal(made.code, 0, made.stderr);
    const viaCli = (JSON.parse(made.stdout) as { token: string }).token;
    for (const [name, token] of [
      ["alice-approver", own],
      ["alice-second", cased],
      ["alice-chained", chained],
    ] as const) {
      const refused = await refusal(new ApiClient(server.url, token).rolloutCommand(id, "approve"));
      assert.equal(refused.code, 7 /* permission_denied */, `${name}: ${refused.message}`);
      assert.equal(refused.details?.requirement, "allow_submitter", name);
    }
    const cliRefused = await runCli(["approve", id], { cwd: ws.dir, server: server.url, token: viaCli, env: { MANENT_OUTPUT: "text" } });
    assert.notEqual(cliRefused.code, 0);
    assert.match(cliRefused.stderr, /refuses the submitter \(approvers\.allow_submitter: false\)/);
    assert.equal((await api("alice").deploy(id)).rollout!.approvals?.length ?? 0, 0);
    // The audit counts each refusal as alice's, through the token named.
    const refusals = (await api("alice").audit({ deploy_id: id })).entries.filter((e) => e.action === "approve");
    assert.deepEqual(refusals.map((e) => `${e.actor} ${e.actor_id} ${e.outcome}`).sort(), [
      "alice-approver token:alice permission_denied",
      "alice-chained token:alice permission_denied",
      "alice-cli token:alice permission_denied",
      "alice-second token:alice permission_denied",
    ]);
    // Two other people end the wait.
    assert.equal((await cli("bob", "approve", id)).code, 0);
    await until(id, approvedBy(1), "bob's approval");
    assert.equal((await cli("carol", "approve", id)).code, 0);
    assert.equal((await api("alice").deploy(id, 60)).status, "succeeded");

    // A deploy submitted with alice's managed token is hers: she may not approve it with her own token, nor another of hers.
    await ws.write("envconfig/untenanted/by-token/by-token/prod.yml", {
      plugin: "noop",
      targets: [{ host: "by-token-1" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollout: { canary: { steps: [{ set_weight: 10 }, { approval: { approvers: twoPeople } }] } },
    });
    const deployerToken = await make(api("alice"), "alice-deployer", "deployer");
    const submitted = await new ApiClient(server.url, deployerToken).submit({
      descriptor: descriptor("by-token", "prod", artifact, "2.0.0"),
      descriptor_file: "by-token.yml",
    });
    const record = await until(submitted.id, approvedBy(0), "waiting for approval");
    assert.deepEqual([record.submitted_by, record.submitted_by_id], ["alice-deployer", "token:alice"]);
    for (const token of [people.alice, own]) {
      const refused = await refusal(new ApiClient(server.url, token).rolloutCommand(submitted.id, "approve"));
      assert.equal(refused.details?.requirement, "allow_submitter");
    }
    await api("alice").cancel(submitted.id);
  });

  it("stops a promote --full at an approval that names its approvers, then skips the rest once approved", async () => {
    const id = await start("alice", "full", {
      canary: {
        steps: [
          { set_weight: 10 },
          { pause: {} },
          { set_weight: 30 },
          { approval: { approvers: fourEyes } },
          { set_weight: 60 },
          { approval: {} },
        ],
      },
    });
    await until(id, (d) => d.rollout?.waiting?.kind === "pause", "paused");
    assert.equal((await cli("alice", "promote", id, "--full")).code, 0);
    const waiting = await until(id, (d) => d.rollout?.waiting?.step === "canary-4:approval", "at the four-eyes approval");
    assert.equal(waiting.rollout!.canary!.weight, 10);
    await api("bob").rolloutCommand(id, "approve");
    await until(id, approvedBy(1), "one approval");
    await api("carol").rolloutCommand(id, "approve");
    const d = await api("alice").deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    const calls = (await readJournal(ws.path("journal")))
      .filter((j) => j.deployment === id && j.call === "set_candidate_weight")
      .map((j) => j.extra);
    assert.deepEqual(calls, ["weight=10"]);
    // The plain approval after it was skipped, as promote --full does.
    assert.equal(
      d.steps.find((s) => s.name === "canary-6:approval"),
      undefined,
    );
  });

  it("keeps the first approval when the server is killed before the second", async () => {
    await server.stop();
    const doomed = await startServer(config, { cwd: ws.dir, env: { MANENT_FAULT_KILL_AT: "wave-1:gate-1:approval:approved" } });
    const targets = [
      { host: "kill-1", labels: { region: "eu" } },
      { host: "kill-2", labels: { region: "us" } },
    ];
    await ws.write(`envconfig/untenanted/kill/kill/prod.yml`, {
      plugin: "noop",
      targets,
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout: { waves: { by: ["region"], between: [{ approval: { approvers: fourEyes } }] } },
    });
    const { id } = await api("alice", doomed).submit({
      descriptor: descriptor("kill", "prod", artifact, "2.0.0"),
      descriptor_file: "kill.yml",
    });
    await until(id, approvedBy(0), "waiting between waves", doomed);
    // The server kills itself once the approval is counted, which may be before its answer is sent.
    await api("bob", doomed)
      .rolloutCommand(id, "approve")
      .catch((err: unknown) => {
        if (!(err instanceof ManentError && err.code === Code.Unavailable)) throw err;
      });
    const exit = await doomed.exited;
    assert.equal(exit.signal, "SIGKILL", `not killed after the first approval:\n${doomed.logs().slice(-3000)}`);

    server = await startServer(config, { cwd: ws.dir });
    // Only carol approves after the restart: the deploy goes on only if bob's approval was kept. Sent
    // once, whenever the resumed workflow replays its transitions (the state it had reached stands).
    await api("carol").rolloutCommand(id, "approve");
    const d = await api("alice").deploy(id, 60);
    assert.equal(d.status, "succeeded", JSON.stringify(d.error));
    assert.deepEqual(
      d.rollout!.approvals!.map((a) => `${a.step} ${a.by}`),
      ["wave-1:gate-1:approval bob", "wave-1:gate-1:approval carol"],
    );
  });
});
