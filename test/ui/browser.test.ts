import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { ApiClient } from "../../src/cli/api-client.js";
import { buildSamplePlugin } from "../external/helpers.js";
import { chromiumArgs } from "../support/browser.js";
import { collect } from "../support/event-stream.js";
import { TestPostgres } from "../support/postgres.js";
import { repoRoot, runCli, startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const adminToken = "ui-admin-token-0123456789";
const teamA = "ui-team-a-token-0123456789";
const teamB = "ui-team-b-token-0123456789";
const teamAViewer = "ui-team-a-viewer-0123456789";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
/** Screenshots for people to look at (gitignored). */
const shots = join(repoRoot, "test-artifacts", "ui");

/** The web UI in a real headless Chromium (Debian's, driven by playwright-core) against a real manent-server. */
describe("web UI", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let browser: BrowserContext;
  let profile: string;
  let artifact: string;

  /** A signed-in page; every confirmation is accepted, and its question kept in `dialogs`. */
  const open = async (token: string, dialogs: string[] = []): Promise<Page> => {
    const page = await browser.newPage();
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await page.goto(server.url);
    await page.getByLabel("API token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    return page;
  };

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "ui\n");
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        // An external plugin (the TS sample), for the plugins page's restart button.
        plugins: { noop: { artifact_types: ["file"] }, sample: { external: { command: await buildSamplePlugin(ws.dir) } } },
        auth: {
          tokens: [
            { name: "admin", tenant: "*", sha256: sha(adminToken) },
            { name: "alice", tenant: "team-a", sha256: sha(teamA) },
            { name: "bob", tenant: "team-b", sha256: sha(teamB) },
            { name: "vera", tenant: "team-a", role: "viewer", sha256: sha(teamAViewer) },
          ],
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir });
    for (const [tenant, app, hosts, delay] of [
      ["team-a", "shop", 3, "600ms"],
      ["team-b", "bank", 1, "0ms"],
    ] as const) {
      await ws.write(`envconfig/${tenant}/${app}/${app}/test.yml`, {
        plugin: "noop",
        targets: Array.from({ length: hosts }, (_, i) => ({ host: `${app}-${i + 1}` })),
        params: { state_dir: ws.path("state"), journal: ws.path("journal"), delay },
      });
    }
    // An environment whose target the retry test breaks and repairs.
    await ws.write("envconfig/team-a/shop/shop/qa.yml", {
      plugin: "noop",
      targets: [{ host: "retry-1" }],
      params: { state_dir: ws.path("retry-state") },
      max_retries: 0,
    });
    await mkdir(shots, { recursive: true });
    profile = await mkdtemp(join(tmpdir(), "manent-chromium-"));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: "/usr/bin/chromium",
      headless: true,
      viewport: { width: 1366, height: 900 },
      args: chromiumArgs,
    });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await pg?.stop();
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it("shows a deploy started from the CLI live: its steps and targets appear as their events arrive", async (t) => {
    const first = await new ApiClient(server.url, teamA).submit({
      descriptor: { ...descriptor("shop", "test", artifact, "1.0.0"), tenant: "team-a" },
    });
    assert.equal((await new ApiClient(server.url, teamA).deploy(first.id, 60)).status, "succeeded");

    const page = await open(teamA);
    await page.getByRole("link", { name: "Deploys" }).click();
    await page.getByRole("heading", { name: "Deploys" }).waitFor();
    const events = collect(server.url, adminToken, "/api/v1/events");
    await events.opened;
    const file = await ws.write("shop.yml", { ...descriptor("shop", "test", `file://${artifact}`, "2.0.0"), tenant: "team-a" });
    const cli = runCli(["deploy", "-f", file, "-o", "json", "--no-wait"], { cwd: ws.dir, server: server.url, token: teamA });
    const created = await events.waitFor((e) => e.type === "deploy.created" && e.data.version === "2.0.0");
    const id = created.deploy_id!;
    // The list shows it live, then its page.
    await page.locator(`tr[data-deploy="${id}"]`).waitFor();
    await page.locator(`tr[data-deploy="${id}"] a`).first().click();
    await page.getByRole("heading", { name: /Deploy of shop/ }).waitFor();
    const lag: number[] = [];
    for (const host of ["shop-1", "shop-2", "shop-3"]) {
      const cell = page.locator(`tr[data-target="${host}"]`, { hasText: "deployed" });
      await cell.waitFor();
      const seen = Date.now();
      const event = await events.waitFor(
        (e) => e.deploy_id === id && e.type === "target.updated" && e.data.host === host && e.data.status === "deployed",
      );
      lag.push(seen - event.receivedAt);
      if (host === "shop-1") await page.screenshot({ path: join(shots, "deploy-mid-rollout.png"), fullPage: true });
    }
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor();
    const stepDone = await events.waitFor((e) => e.deploy_id === id && e.type === "step.succeeded" && e.data.name === "deploy");
    assert.ok(stepDone);
    for (const step of ["resolve", "fetch", "validate", "checkpoint", "deploy"]) {
      assert.match(await page.locator(`li[data-step="${step}"]`).innerText(), /succeeded[\s\S]*attempt 1/);
    }
    await page.screenshot({ path: join(shots, "deploy-finished.png"), fullPage: true });
    await events.stop();
    assert.equal((await cli).code, 0);
    t.diagnostic(
      `target event (at a test client) -> shown in the page: ${lag.map((l) => `${l} ms`).join(", ")} (the page and the test client read the same stream; negative: the page was first)`,
    );
    await page.close();
  });

  it("rolls back from the history page with one click, and shows it in the audit log", async () => {
    const page = await open(teamA);
    await page.goto(`${server.url}/#/history/team-a/shop/shop/test`);
    await page.getByText("current release: 2.0.0").waitFor();
    await page.getByRole("button", { name: "Roll back to 1.0.0" }).click();
    await page.getByRole("heading", { name: /Rollback of shop/ }).waitFor();
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor({ timeout: 60_000 });
    await page.goto(`${server.url}/#/history/team-a/shop/shop/test`);
    await page.getByText("current release: 1.0.0").waitFor();

    await page.getByRole("link", { name: "Audit" }).click();
    await page.getByRole("heading", { name: "Audit log" }).waitFor();
    const rollback = page.locator('tr[data-audit="rollback"]').first();
    await rollback.waitFor();
    assert.match(await rollback.innerText(), /alice[\s\S]*team-a[\s\S]*rollback[\s\S]*ok[\s\S]*127\.0\.0\.1/);
    assert.ok((await page.locator('tr[data-audit="submit"]').count()) >= 2);
    await page.screenshot({ path: join(shots, "audit.png"), fullPage: true });
    await page.close();
  });

  it("approves a paused canary from the deploy page", async () => {
    await ws.write("envconfig/team-a/cana/cana/test.yml", {
      plugin: "noop",
      targets: [{ host: "cana-1" }, { host: "cana-2" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout: { canary: { steps: [{ set_weight: 20 }, { approval: {} }, { set_weight: 100 }] } },
    });
    const api = new ApiClient(server.url, teamA);
    const v2 = await api.submit({ descriptor: { ...descriptor("cana", "test", artifact, "2.0.0"), tenant: "team-a" } });
    const page = await open(teamA);
    await page.goto(`${server.url}/#/deploys/${v2.id}`);
    const approve = page.getByRole("button", { name: "Approve" });
    await approve.waitFor({ timeout: 60_000 });
    await page.getByText(/Canary: 20%/).waitFor();
    await page.screenshot({ path: join(shots, "canary-waiting.png"), fullPage: true });
    await approve.click();
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor({ timeout: 60_000 });
    await page.getByText(/Canary: 100%/).waitFor();
    await page.screenshot({ path: join(shots, "canary-promoted.png"), fullPage: true });
    const audit = (await api.audit({ action: "approve" })).entries;
    assert.equal(audit[0]?.deploy_id, v2.id);
    assert.equal(audit[0]?.actor, "alice");
    await page.close();
  });

  it("shows who approved and who is still awaited, and the refusal of the submitter's own approval", async () => {
    await ws.write("envconfig/team-a/eyes/eyes/test.yml", {
      plugin: "noop",
      targets: [{ host: "eyes-1" }],
      params: { state_dir: ws.path("state"), journal: ws.path("journal") },
      rollback: { enabled: true },
      rollout: { canary: { steps: [{ set_weight: 20 }, { approval: { approvers: { count: 1, allow_submitter: false } } }] } },
    });
    const d = await new ApiClient(server.url, teamA).submit({
      descriptor: { ...descriptor("eyes", "test", artifact, "2.0.0"), tenant: "team-a" },
    });
    const page = await open(teamA);
    await page.goto(`${server.url}/#/deploys/${d.id}`);
    const approvals = page.getByLabel("approvals");
    await approvals
      .getByText("0 of 1 approvals at canary-2:approval: 1 more awaited; the submitter may not approve")
      .waitFor({ timeout: 60_000 });
    await page.getByRole("button", { name: "Approve" }).click();
    await page
      .getByText(/alice submitted it, and the approval at canary-2:approval refuses the submitter \(approvers\.allow_submitter: false\)/)
      .waitFor();
    await new ApiClient(server.url, adminToken).rolloutCommand(d.id, "approve");
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor({ timeout: 60_000 });
    await approvals.getByRole("cell", { name: "admin" }).waitFor();
    await page.screenshot({ path: join(shots, "approvals.png"), fullPage: true });
    await page.close();
  });

  it("shows the deploy the URL names after Back, Forward and an edited URL, never the previous one's state", async () => {
    const api = new ApiClient(server.url, teamA);
    const shop = (await api.list({ application: "shop" })).deploys.find((d) => d.status === "succeeded")!;
    const cana = (await api.list({ application: "cana" })).deploys[0]!;
    const page = await open(teamA);
    // Each deploy's page as a reader checks it: title, and only its own targets.
    const shows = async (expected: typeof shop, other: typeof shop): Promise<void> => {
      await page
        .getByRole("heading", { name: new RegExp(`of ${expected.application} ${expected.version.replace(/\./g, "\\.")} `) })
        .waitFor();
      await page.locator(`tr[data-target^="${expected.application}-"]`).first().waitFor();
      assert.equal(
        await page.locator(`tr[data-target^="${other.application}-"]`).count(),
        0,
        `${other.application}'s targets under ${expected.id}`,
      );
      assert.equal(await page.getByRole("heading", { name: new RegExp(`of ${other.application} `) }).count(), 0);
    };
    await page.goto(`${server.url}/#/deploys/${shop.id}`);
    await shows(shop, cana);
    await page.goto(`${server.url}/#/deploys/${cana.id}`);
    await shows(cana, shop);
    for (let round = 0; round < 3; round++) {
      await page.goBack();
      await shows(shop, cana);
      await page.goForward();
      await shows(cana, shop);
    }
    // An edited URL (the hash typed over) rather than a navigation the page made.
    await page.evaluate(`location.hash = "#/deploys/${shop.id}"`);
    await shows(shop, cana);
    await page.close();
  });

  it("never shows a tenant's token another tenant's deploys", async () => {
    const bank = await new ApiClient(server.url, adminToken).submit({
      descriptor: { ...descriptor("bank", "test", artifact, "1.0.0"), tenant: "team-b" },
    });
    assert.equal((await new ApiClient(server.url, adminToken).deploy(bank.id, 60)).status, "succeeded");
    const shop = (await new ApiClient(server.url, teamA).list({ application: "shop" })).deploys[0]!;

    const page = await open(teamB);
    await page.locator('[data-application="team-b/bank/bank"]').waitFor();
    assert.equal(await page.locator('[data-application^="team-a/"]').count(), 0);
    await page.getByRole("link", { name: "Deploys" }).click();
    await page.locator(`tr[data-deploy="${bank.id}"]`).waitFor();
    assert.equal(await page.locator(`tr[data-deploy="${shop.id}"]`).count(), 0);
    assert.equal(await page.getByText("team-a").count(), 0);
    await page.goto(`${server.url}/#/deploys/${shop.id}`);
    await page.getByText(/not found/).waitFor();
    await page.getByRole("link", { name: "Audit" }).click();
    await page.getByRole("heading", { name: "Audit log" }).waitFor();
    assert.equal(await page.getByText("alice").count(), 0);
    await page.close();
  });

  it("restarts an external plugin from the plugins page (a token for all tenants only), and shows it in the audit log", async () => {
    const team = await open(teamA);
    await team.getByRole("link", { name: "Plugins" }).click();
    await team.locator('tr[data-plugin="sample"]').waitFor();
    assert.equal(await team.getByRole("button", { name: "Restart" }).count(), 0, "a tenant's token is offered a restart");
    await team.close();

    const page = await open(adminToken);
    await page.getByRole("link", { name: "Plugins" }).click();
    const row = page.locator('tr[data-plugin="sample"]');
    await row.locator("td[data-status]", { hasText: "not started" }).waitFor();
    assert.equal(
      await page.locator('tr[data-plugin="noop"]').getByRole("button").count(),
      0,
      "a built-in plugin has no process to restart",
    );
    await row.getByRole("button", { name: "Restart" }).click(); // the confirmation is accepted by open()'s dialog handler
    await row.locator("td[data-status]", { hasText: "up" }).waitFor();
    assert.match(await row.innerText(), /dry_run, current_release, rollback/, "the capabilities of the new process");
    await page.screenshot({ path: join(shots, "plugins-restarted.png"), fullPage: true });
    await page.getByRole("link", { name: "Audit" }).click();
    await page.locator('tr[data-audit="plugin_restart"]', { hasText: "plugin sample" }).waitFor();
    assert.match(
      await page.locator('tr[data-audit="plugin_restart"]').first().innerText(),
      /admin[\s\S]*plugin_restart[\s\S]*ok[\s\S]*plugin sample/,
    );
    await page.close();
  });

  it("the overview shows what runs where, follows a deploy live, and fits a phone's screen", async () => {
    const page = await open(teamA);
    const cell = page.locator('[data-application="team-a/shop/shop"] li[data-environment="test"]');
    await cell.locator(".live .version").waitFor();
    const before = await cell.locator(".live .version").innerText();
    // A deploy from elsewhere: the cell shows it in progress, then live, from the event stream alone.
    const next = await new ApiClient(server.url, teamA).submit({
      descriptor: { ...descriptor("shop", "test", artifact, "9.9.0"), tenant: "team-a" },
    });
    await cell.locator(".progress", { hasText: "9.9.0" }).waitFor();
    await cell.locator(".live .version", { hasText: "9.9.0" }).waitFor();
    assert.notEqual(before, "9.9.0");
    assert.equal(await cell.locator(".progress").count(), 0);
    // From a cell: the deploy's page.
    await cell.getByRole("link", { name: "9.9.0" }).click();
    await page.getByRole("heading", { name: /Deploy of shop 9\.9\.0/ }).waitFor();
    assert.match(page.url(), new RegExp(`#/deploys/${next.id}$`));
    await page.goBack();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(shots, "overview-phone.png"), fullPage: true });
    // The overview's cards stay within the screen (the page's header is the layout's own test).
    const [right, width] = (await page.evaluate(
      "[Math.max(...[...document.querySelectorAll('.overview, .overview *')].map((e) => e.getBoundingClientRect().right)), innerWidth]",
    )) as [number, number];
    assert.ok(right <= width, `the overview reaches ${right} px on a ${width} px wide screen`);
    await page.close();
  });

  it("follows a release through dev → staging → prod: promoted from the overview's cell, approved on its page, at 1366 and 390 px", async () => {
    for (const env of ["dev", "staging", "prod"]) {
      await ws.write(`envconfig/team-a/flow/flow/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `flow-${env}-1` }],
        params: { state_dir: ws.path("state") },
      });
    }
    await ws.write("envconfig/team-a/flow/pipeline.yml", {
      stages: [{ environment: "dev" }, { environment: "staging", promotion: "manual" }, { environment: "prod", approval: {} }],
    });
    const { id } = await new ApiClient(server.url, teamA).startRelease({
      descriptor: { ...descriptor("flow", "dev", artifact, "4.0.0"), tenant: "team-a" },
      descriptor_file: "flow.yml",
    });
    const card = (page: Page) => page.locator('[data-application="team-a/flow/flow"]');
    const waitingIn = (page: Page, env: string) => card(page).locator(`li[data-environment="${env}"] .pending[data-release="${id}"]`);

    // A viewer sees the release waiting for staging, and no button to promote it.
    const viewer = await open(teamAViewer);
    await waitingIn(viewer, "staging").filter({ hasText: "waiting for promotion" }).waitFor();
    assert.equal(await waitingIn(viewer, "staging").getByRole("button").count(), 0);
    await viewer.close();

    const dialogs: string[] = [];
    const page = await open(teamA, dialogs);
    await page.setViewportSize({ width: 1366, height: 900 });
    const promote = waitingIn(page, "staging").getByRole("button", { name: "Promote 4.0.0 to staging" });
    await promote.click();
    assert.deepEqual(dialogs, ["Promote flow 4.0.0 to staging?"]);
    // Live: staging runs it, and the release now waits for an approval to enter prod.
    await card(page).locator('li[data-environment="staging"] .live .version', { hasText: "4.0.0" }).waitFor();
    await waitingIn(page, "prod").filter({ hasText: "waiting for approval" }).waitFor();
    assert.equal(await waitingIn(page, "staging").count(), 0);
    await waitingIn(page, "prod").getByRole("link", { name: "4.0.0" }).click();

    // The release's page: its path, who promoted staging, prod waiting; approved there.
    await page.getByRole("heading", { name: "Release of flow 4.0.0" }).waitFor();
    assert.match(page.url(), new RegExp(`#/releases/${id}$`));
    const stage = (n: number) => page.locator(`.release-path li[data-stage="${n}"]`);
    await stage(3).filter({ hasText: "waiting" }).waitFor();
    assert.match(await stage(1).innerText(), /dev\s+succeeded[\s\S]*Deploy to dev\s+succeeded/);
    assert.match(await stage(2).innerText(), /Manual promotion: promoted by alice/);
    await page.setViewportSize({ width: 390, height: 844 });
    const [right, width] = (await page.evaluate(
      "[Math.max(...[...document.querySelectorAll('main, main *')].map((e) => e.getBoundingClientRect().right)), innerWidth]",
    )) as [number, number];
    assert.ok(right <= width, `the release page reaches ${right} px on a ${width} px wide screen`);
    await page.getByRole("button", { name: "Approve for prod" }).click();
    assert.equal(dialogs[1], "Approve flow 4.0.0 for prod?");
    await page.locator("#release-status", { hasText: "succeeded" }).waitFor();
    await stage(3)
      .filter({ hasText: /approved by alice/ })
      .waitFor();
    await page.screenshot({ path: join(shots, "release-phone.png"), fullPage: true });
    assert.equal(await page.getByRole("button", { name: /Cancel release|Approve|Promote/ }).count(), 0, "nothing to do once it ended");

    // The list of releases shows it, and both commands are audited.
    await page.getByRole("link", { name: "Releases" }).click();
    await page.locator(`tr[data-release="${id}"]`, { hasText: "succeeded" }).waitFor();
    assert.match(await page.locator(`tr[data-release="${id}"]`).innerText(), /team-a\/flow[\s\S]*4\.0\.0[\s\S]*dev → staging → prod/);
    const audit = (await new ApiClient(server.url, adminToken).audit({ application: "flow" })).entries;
    for (const action of ["release_promote", "release_approve"])
      assert.ok(
        audit.some((e) => e.action === action && e.actor === "alice" && e.outcome === "ok"),
        action,
      );
    await page.close();
  });

  it("retries a release that failed in staging from its page, after a confirmation naming where it restarts, linked both ways", async () => {
    for (const env of ["dev", "staging", "prod"]) {
      await ws.write(`envconfig/team-a/relay/relay/${env}.yml`, {
        plugin: "noop",
        targets: [{ host: `relay-${env}-1` }],
        params: { state_dir: ws.path("relay-state") },
        max_retries: 0,
      });
    }
    await ws.write("envconfig/team-a/relay/pipeline.yml", {
      stages: [{ environment: "dev" }, { environment: "staging" }, { environment: "prod" }],
    });
    // The noop plugin cannot write a release file that is a directory: staging fails until it is removed.
    const broken = ws.path("relay-state", "relay-staging-1.release");
    await mkdir(broken, { recursive: true });
    const api = new ApiClient(server.url, teamA);
    const { id: failed } = await api.startRelease({
      descriptor: { ...descriptor("relay", "dev", artifact, "5.0.0"), tenant: "team-a" },
      descriptor_file: "relay.yml",
    });
    await api.streamEvents(`/api/v1/releases/${failed}/events`, (e) => e.type === "release.status" && e.data.status !== "running", {
      after: 0,
    });
    assert.equal((await api.release(failed)).status, "failed");
    await rm(broken, { recursive: true });

    // A viewer sees the failed release but no Retry button: it may not start one.
    const viewer = await open(teamAViewer);
    await viewer.goto(`${server.url}/#/releases/${failed}`);
    await viewer.getByRole("heading", { name: "Release of relay 5.0.0" }).waitFor();
    await viewer.locator("#release-status", { hasText: "failed" }).waitFor();
    assert.equal(await viewer.getByRole("button", { name: /Retry/ }).count(), 0);
    await viewer.close();

    const dialogs: string[] = [];
    const page = await open(teamA, dialogs);
    await page.goto(`${server.url}/#/releases/${failed}`);
    await page.getByRole("heading", { name: "Release of relay 5.0.0" }).waitFor();
    await page.getByRole("button", { name: "Retry from staging" }).click();
    await page.waitForURL((url) => /#\/releases\/[0-9a-f-]{36}$/.test(url.hash) && !url.hash.endsWith(failed));
    assert.deepEqual(dialogs, [
      "Retry the release of relay 5.0.0, with the same artifact? It restarts from staging (stage 2); dev is not deployed again.",
    ]);
    const retry = /#\/releases\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
    await page.locator("#release-status", { hasText: "succeeded" }).waitFor();
    const stage = (n: number) => page.locator(`.release-path li[data-stage="${n}"]`);
    assert.match(await stage(1).innerText(), new RegExp(`Done by release ${failed.slice(-8)}`));
    assert.doesNotMatch(await stage(2).innerText(), /Done by release/);
    assert.equal(await page.getByRole("button", { name: /Retry/ }).count(), 0, "a succeeded release is not retried");
    await page
      .locator("dl.facts")
      .getByRole("link", { name: failed.slice(-8) })
      .click();
    await page.waitForURL((url) => url.hash.endsWith(failed));
    await page
      .locator("dl.facts")
      .getByRole("link", { name: retry.slice(-8) })
      .waitFor();
    assert.equal((await api.release(retry)).retry_of, failed);
    const audit = (await new ApiClient(server.url, adminToken).audit({ application: "relay" })).entries;
    assert.ok(audit.some((e) => e.action === "release_retry" && e.actor === "alice" && e.outcome === "ok"));
    await page.close();
  });

  it("retries a failed deploy from its page, after a confirmation naming what, and shows the new deploy linked to it", async () => {
    // The noop plugin cannot write a release file that is a directory: the deploy fails until it is removed.
    const release = ws.path("retry-state", "retry-1.release");
    await mkdir(release, { recursive: true });
    const api = new ApiClient(server.url, teamA);
    const { id: failed } = await api.submit({ descriptor: { ...descriptor("shop", "qa", artifact, "3.1.0"), tenant: "team-a" } });
    assert.notEqual((await api.deploy(failed, 60)).status, "succeeded");
    await rm(release, { recursive: true });

    // A viewer sees the failed deploy but no Retry button: it may not submit.
    const viewer = await open(teamAViewer);
    await viewer.goto(`${server.url}/#/deploys/${failed}`);
    await viewer.getByRole("heading", { name: /Deploy of shop 3\.1\.0/ }).waitFor();
    await viewer.locator("#deploy-status", { hasText: /failed|rolled_back/ }).waitFor();
    assert.equal(await viewer.getByRole("button", { name: "Retry" }).count(), 0);
    await viewer.close();

    const page = await open(teamA);
    const asked: string[] = [];
    page.on("dialog", (d) => void asked.push(d.message()));
    await page.goto(`${server.url}/#/deploys/${failed}`);
    await page.getByRole("heading", { name: /Deploy of shop 3\.1\.0/ }).waitFor();
    await page.getByRole("button", { name: "Retry" }).click(); // accepted by open()'s dialog handler
    await page.waitForURL((url) => /#\/deploys\/[0-9a-f-]{36}$/.test(url.hash) && !url.hash.endsWith(failed));
    assert.deepEqual(asked, ["Retry the deploy of shop 3.1.0 to qa, with the same artifact and settings?"]);
    const retry = /#\/deploys\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor();
    await page.getByRole("link", { name: failed.slice(-8) }).click();
    await page.waitForURL((url) => url.hash.endsWith(failed));
    await page.getByRole("link", { name: retry.slice(-8) }).waitFor();
    assert.equal(await page.getByRole("button", { name: "Retry" }).count(), 1, "still retryable: it stays failed");
    assert.equal((await api.deploy(retry)).retry_of, failed);
    await page.close();
  });
});
