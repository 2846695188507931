import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { ApiClient } from "../../src/cli/api-client.js";
import type { DeployRecord } from "../../src/core/engine/deploy-store.js";
import { launchChromium } from "../support/browser.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const adminToken = "pages-admin-token-0123456789";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

interface AxeResult {
  passes: unknown[];
  violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[];
}

/**
 * Every page of the web UI as people use it, in a real headless Chromium against a real server: on
 * a 390 px phone, checked by axe-core, a target's error and a reverted candidate as they read, the
 * rollout buttons, and the sign-in of an open API.
 */
describe("web UI pages", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let chromium: { browser: Browser; close: () => Promise<void> };
  let api: ApiClient;
  let artifact: string;
  let failed: DeployRecord;
  let aborted: string;
  let soaking: string;

  const envconfig = (app: string, extra: Record<string, unknown>, hosts = 2) =>
    ws.write(`envconfig/untenanted/${app}/${app}/test.yml`, {
      plugin: "noop",
      targets: Array.from({ length: hosts }, (_, i) => ({ host: `${app}-${i + 1}` })),
      ...extra,
      params: { state_dir: ws.path("state"), journal: ws.path("journal"), ...(extra.params as object) },
    });
  const submit = async (app: string, version: string) =>
    (await api.submit({ descriptor: descriptor(app, "test", artifact, version), descriptor_file: `${app}.yml` })).id;
  /** Polls the API until the deploy's rollout waits (the server long-polls only for a deploy's end). */
  const waiting = async (id: string): Promise<void> => {
    for (;;) {
      const d = await api.deploy(id);
      if (d.rollout?.waiting) return;
      assert.ok(["queued", "running"].includes(d.status), `deploy ${id} ended (${d.status}) before it waited`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const signedIn = async (viewport = { width: 1366, height: 900 }): Promise<Page> => {
    const context = await chromium.browser.newContext({ viewport });
    const page = await context.newPage();
    page.on("dialog", (d) => void d.accept());
    await page.goto(server.url);
    await page.getByLabel("API token").fill(adminToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    return page;
  };
  /** Each page, shown once its content is there: what the checks below look at. */
  const pages = (): { name: string; hash: string; ready: (p: Page) => Promise<unknown> }[] => [
    {
      name: "overview",
      hash: "#/",
      ready: (p) => p.locator('[data-application="untenanted/gate/gate"] li[data-environment="staging"] .pending button').waitFor(),
    },
    { name: "deploys", hash: "#/deploys", ready: (p) => p.locator("tr[data-deploy]").first().waitFor() },
    {
      name: "deploy (failed target)",
      hash: `#/deploys/${failed.id}`,
      ready: (p) => p.locator('tr[data-target="fail-2"] .target-error').waitFor(),
    },
    {
      name: "deploy (aborted canary)",
      hash: `#/deploys/${aborted}`,
      ready: (p) => p.locator('tr[data-target="cana-1"] td[data-now]', { hasText: "reverted" }).waitFor(),
    },
    { name: "history", hash: "#/history/untenanted/fail/fail/test", ready: (p) => p.locator("tr[data-deploy]").first().waitFor() },
    { name: "plugins", hash: "#/plugins", ready: (p) => p.locator('tr[data-plugin="noop"]').waitFor() },
    { name: "releases", hash: "#/releases", ready: (p) => p.locator("tr[data-release]").first().waitFor() },
    {
      name: "release (soaking)",
      hash: `#/releases/${soaking}`,
      ready: (p) => p.locator('.release-path li[data-stage="2"]', { hasText: /left\)/ }).waitFor(),
    },
    { name: "audit", hash: "#/audit", ready: (p) => p.locator("tr[data-audit]").first().waitFor() },
  ];
  const axe = async (page: Page): Promise<string[]> => {
    // Evaluated rather than added as a <script>: the UI's Content-Security-Policy (script-src 'self') refuses inline scripts, as it should.
    await page.evaluate(axeSource);
    const result = (await page.evaluate("axe.run(document)")) as AxeResult;
    assert.ok(result.passes.length > 0, "axe checked nothing");
    return result.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  };
  // Run in the page (strings: this file is compiled without the DOM's types).
  const sideways = (page: Page) =>
    page.evaluate(`(() => {
      const e = document.scrollingElement;
      return { scrollWidth: e.scrollWidth, clientWidth: e.clientWidth, height: e.scrollHeight };
    })()`) as Promise<{ scrollWidth: number; clientWidth: number; height: number }>;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "pages\n");
    const config = await ws.write(
      "manent.yml",
      manentYml(await pg.createDatabase(), {
        auth: { tokens: [{ name: "admin", tenant: "*", sha256: sha(adminToken) }] },
        // Environment "frozen" is in a freeze for the next day: its deploys wait for the window.
        deploy_windows: {
          freezes: [
            {
              name: "pages",
              start: new Date(Date.now() - 3_600_000).toISOString(),
              end: new Date(Date.now() + 86_400_000).toISOString(),
              reason: "UI test",
              environment: "frozen",
            },
          ],
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir });
    api = new ApiClient(server.url, adminToken);
    // A deploy whose second target fails with an error of its own.
    await envconfig("fail", { params: { fail_hosts: "fail-2", fail_mode: "permanent" } });
    failed = await api.deploy(await submit("fail", "1.0.0"), 60);
    assert.equal(failed.status, "failed");
    // A canary aborted from its page (below); and one to promote fully.
    await envconfig("cana", {
      rollback: { enabled: true },
      rollout: { canary: { steps: [{ set_weight: 20 }, { pause: "1h" }, { set_weight: 100 }] } },
    });
    await envconfig("full", {
      rollback: { enabled: true },
      rollout: { canary: { steps: [{ set_weight: 10 }, { pause: "1h" }, { approval: {} }, { set_weight: 50 }] } },
    });
    // Two releases: one soaking an hour in staging (prod waits behind it), one waiting to be promoted to staging.
    for (const [app, stages] of [
      ["soak", [{ environment: "dev" }, { environment: "staging", soak: "1h" }, { environment: "prod", approval: {} }]],
      ["gate", [{ environment: "dev" }, { environment: "staging", promotion: "manual" }]],
    ] as const) {
      for (const env of ["dev", "staging", "prod"])
        await ws.write(`envconfig/untenanted/${app}/${app}/${env}.yml`, { plugin: "noop", targets: [{ host: `${app}-1` }] });
      await ws.write(`envconfig/untenanted/${app}/pipeline.yml`, { stages });
      const { id } = await api.startRelease({ descriptor: descriptor(app, "dev", artifact, "5.0.0"), descriptor_file: `${app}.yml` });
      await releaseWaits(id, app === "soak" ? "soak" : "promotion");
      if (app === "soak") soaking = id;
    }
    chromium = await launchChromium();
  });
  /** Follows a release's event stream until it waits for `kind`. */
  const releaseWaits = async (id: string, kind: string): Promise<void> => {
    let r = await api.release(id);
    await api.streamEvents(
      `/api/v1/releases/${id}/events`,
      (e) => {
        if (e.type === "release.updated" || e.type === "release.status") r = { ...r, ...(e.data as Partial<typeof r>) };
        return r.waiting?.kind === kind || r.status !== "running";
      },
      { after: 0 },
    );
    assert.equal(r.waiting?.kind, kind, `release ${id} is ${r.status}: ${r.error?.message ?? ""}`);
  };
  after(async () => {
    await chromium?.close();
    await server?.stop();
    await pg?.stop();
  });

  it("shows a deploy waiting for its window and lets an admin start it, with the reason asked for", async () => {
    await ws.write("envconfig/untenanted/held/held/frozen.yml", { plugin: "noop", targets: [{ host: "held-1" }] });
    const { id } = await api.submit({ descriptor: descriptor("held", "frozen", artifact, "1.0.0"), descriptor_file: "held.yml" });
    for (let d = await api.deploy(id); !d.waiting; d = await api.deploy(id)) {
      assert.equal(d.status, "queued");
      await new Promise((r) => setTimeout(r, 50));
    }
    const page = await signedIn();
    const asked: string[] = [];
    page.removeAllListeners("dialog");
    page.on("dialog", (d) => {
      asked.push(d.message());
      void d.accept("INC-9 from the web UI");
    });
    await page.goto(`${server.url}/#/deploys/${id}`);
    await page.locator("#deploy-waiting", { hasText: /waiting for deploy window until .* \(freeze pages: UI test\)/ }).waitFor();
    await page.getByRole("button", { name: "Override window" }).click();
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor();
    assert.equal(await page.locator("#deploy-waiting").count(), 0, "no longer waiting");
    assert.match(asked[0] ?? "", /outside its deploy window\? Say why/);
    const audit = await api.audit({ action: "window_override" });
    assert.equal(audit.entries.find((e) => e.deploy_id === id)?.message, "INC-9 from the web UI");
    await page.context().close();
  });

  it("writes a target's error in its cell, readable without a mouse and by a screen reader", async () => {
    const page = await signedIn();
    await page.goto(`${server.url}/#/deploys/${failed.id}`);
    const error = failed.targets.find((t) => t.host === "fail-2")!.error!;
    assert.match(error, /target fail-2: failing as configured/);
    const cell = page.locator('tr[data-target="fail-2"] td[data-phase="deploy"]');
    await cell.getByText(error).waitFor();
    assert.ok(await cell.getByText(error).isVisible(), "the error is shown, not only in a title");
    assert.equal(await page.locator("td[title]").count(), 0, "no error kept in a hover title");
    // What a screen reader reads of the row: the host, its status and its error.
    const row = await page.getByRole("row", { name: /fail-2/ }).ariaSnapshot();
    assert.match(row, /failed/);
    assert.match(row, /failing as configured/);
    await page.context().close();
  });

  it("shows the candidate's targets reverted, not deployed, after an abort from the deploy page", async () => {
    aborted = await submit("cana", "2.0.0");
    await waiting(aborted);
    const page = await signedIn();
    await page.goto(`${server.url}/#/deploys/${aborted}`);
    await page.getByRole("button", { name: "Abort" }).click(); // confirmed by the dialog handler
    await page.locator("#deploy-status", { hasText: "rolled back" }).waitFor({ timeout: 60_000 });
    for (const host of ["cana-1", "cana-2"]) {
      const row = page.locator(`tr[data-target="${host}"]`);
      await row.locator("td[data-now]", { hasText: "reverted" }).waitFor();
      assert.match(await row.locator('td[data-phase="revert_candidate"]').innerText(), /^reverted\b/);
    }
    // What the API says, which the page shows.
    const d = await api.deploy(aborted);
    assert.deepEqual(
      d.targets.filter((t) => t.phase === "revert_candidate").map((t) => `${t.host} ${t.status}`),
      ["cana-1 rolled_back", "cana-2 rolled_back"],
    );
    await page.context().close();
  });

  it("promotes a paused canary fully from the deploy page: every remaining step and gate skipped", async () => {
    const id = await submit("full", "2.0.0");
    await waiting(id);
    const page = await signedIn();
    await page.goto(`${server.url}/#/deploys/${id}`);
    await page.getByRole("button", { name: "Promote fully" }).click();
    await page.locator("#deploy-status", { hasText: "succeeded" }).waitFor({ timeout: 60_000 });
    const d = await api.deploy(id);
    assert.deepEqual(
      d.rollout!.commands.map((c) => `${c.command} ${c.full} ${c.by}`),
      ["promote true admin"],
    );
    assert.ok(!d.steps.some((s) => s.name === "canary-3:approval" && s.status === "succeeded"), "the approval was skipped");
    await page.context().close();
  });

  it("fits every page in a 390 px wide phone without sideways scrolling, and pages the audit log", async () => {
    // 30 refused commands: audit entries enough for more than one page.
    for (let i = 0; i < 30; i++) await assert.rejects(api.rolloutCommand(failed.id, "approve"), /has already ended/);
    const page = await signedIn({ width: 390, height: 844 });
    for (const p of pages()) {
      await page.goto(`${server.url}/${p.hash}`);
      await p.ready(page);
      const size = await sideways(page);
      assert.ok(size.scrollWidth <= size.clientWidth, `${p.name}: ${size.scrollWidth} px wide in a ${size.clientWidth} px viewport`);
    }
    // The audit log: a page of entries, then older ones on request; its filter.
    const rows = page.locator("tr[data-audit]");
    assert.equal(await rows.count(), 25);
    const { height } = await sideways(page);
    await page.getByRole("button", { name: "Show older entries" }).click();
    await rows.nth(25).waitFor();
    assert.ok((await sideways(page)).height > height);
    await page.getByLabel("Outcome").selectOption("ok");
    await page.locator('td[data-label="Outcome"]', { hasText: "failed_precondition" }).first().waitFor({ state: "detached" });
    assert.deepEqual([...new Set(await page.locator('td[data-label="Outcome"]').allInnerTexts())], ["ok"]);
    assert.ok((await rows.count()) < 25);
    assert.equal(await page.getByRole("button", { name: "Show older entries" }).count(), 0);
    await page.context().close();
  });

  it("has no serious or critical accessibility violation on any page (axe-core)", async () => {
    const context = await chromium.browser.newContext();
    const signIn = await context.newPage();
    await signIn.goto(server.url);
    await signIn.getByLabel("API token").waitFor();
    const found: string[] = (await axe(signIn)).map((v) => `sign-in: ${v}`);
    await context.close();
    for (const viewport of [
      { width: 1366, height: 900 },
      { width: 390, height: 844 },
    ]) {
      const page = await signedIn(viewport);
      for (const p of pages()) {
        await page.goto(`${server.url}/${p.hash}`);
        await p.ready(page);
        found.push(...(await axe(page)).map((v) => `${p.name} at ${viewport.width} px: ${v}`));
      }
      await page.context().close();
    }
    assert.deepEqual(found, []);
  });

  it("never asks for a token where the API is open (nothing to sign in with is configured)", async () => {
    const open = await startServer(await ws.write("open.yml", manentYml(await pg.createDatabase())), { cwd: ws.dir });
    try {
      const context = await chromium.browser.newContext();
      const page = await context.newPage();
      await page.goto(open.url);
      await page.getByRole("heading", { name: "Overview" }).waitFor();
      assert.equal(await page.getByLabel("API token").count(), 0);
      assert.equal(await page.getByRole("button", { name: "Sign out" }).count(), 0, "nobody to sign out");
      await page.getByText("open API, no sign-in configured").waitFor();
      await context.close();
    } finally {
      await open.stop();
    }
  });
});
