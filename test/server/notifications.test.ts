import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { DeployEvent } from "../../src/core/engine/deploy-events.js";
import { WebhookReceiver, SmtpReceiver, type HttpPost } from "../support/notification-receivers.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { TestPostgres } from "../support/postgres.js";
import { TestCa } from "../support/test-ca.js";
import { databaseText } from "../support/database-text.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

/**
 * Notifications of a real manent-server (noop deploys, a canary approval, a drift check, a
 * release) to real receivers on loopback: HTTP servers standing for Slack, Teams and a webhook,
 * and a real SMTP server (STARTTLS and a login). Checks the exact bodies, the retries of a
 * receiver answering 500, the address rules, a delivery surviving a killed server, and that the
 * channels' secrets appear nowhere.
 */
describe("notifications", () => {
  let pg: TestPostgres;
  let ws: Workspace;
  let server: ServerProcess;
  let http: WebhookReceiver;
  let smtp: SmtpReceiver;
  let artifact: string;
  let config: string;
  let env: Record<string, string>;
  let databaseUrl: string;
  /** The logs of the servers stopped before the current one. */
  let pastLogs = "";
  // The secret parts of the URLs: they must appear in no log line and no event.
  const secret = { slack: "/services/T0SECRET/B0SECRET/slacksecret", teams: "/teams/teamsecret", hook: "/hook/hooksecret" };

  const envconfig = (app: string, body: Record<string, unknown>, environment = "test") =>
    ws.write(`envconfig/untenanted/${app}/${app}/${environment}.yml`, body);
  const noop = (app: string, extra: Record<string, unknown> = {}) => ({
    plugin: "noop",
    targets: [{ host: `${app}-1` }],
    params: { state_dir: ws.path(`state-${app}`) },
    ...extra,
  });
  const posts = (path: string, match: (p: HttpPost) => boolean, count = 1) => http.waitFor((p) => p.path === path && match(p), count);
  /** The first event of `stream` (a deploy's or a release's) matching, followed on its event stream. */
  const eventOf = async (stream: string, match: (e: DeployEvent) => boolean): Promise<DeployEvent> => {
    let found: DeployEvent | undefined;
    await server.api.streamEvents(stream, (e) => (match(e) ? ((found = e), true) : false), { after: 0 });
    return found!;
  };
  const notified = (type: string, channel: string, event: string) => (e: DeployEvent) =>
    e.type === type && e.data.channel === channel && e.data.event === event;

  before(async () => {
    pg = await TestPostgres.start();
    ws = await createWorkspace();
    artifact = await ws.write("dist/app.txt", "hello\n");
    const ca = await TestCa.create("smtp-ca");
    const cert = await ca.server();
    await ws.write("smtp-ca.pem", ca.certPem);
    smtp = new SmtpReceiver({ certPem: cert.certPem, keyPem: cert.keyPem, username: "manent", password: "smtp-password-secret" });
    await smtp.start();
    http = new WebhookReceiver();
    await http.start();
    await ws.write("teams-url", `${http.answer(secret.teams, 200)}\n`);
    env = {
      TEST_SLACK_URL: http.answer(secret.slack, 200),
      TEST_HOOK_URL: http.answer(secret.hook, 200),
      TEST_HOOK_TOKEN: "hook-token-secret",
      TEST_FLAKY_URL: http.answer("/flaky", 500, 500, 200),
      TEST_LATE_URL: http.answer("/late", 500),
      // 127.0.0.2 is outside the test's allowed_networks (127.0.0.1/32): refused before anything is sent.
      TEST_REFUSED_URL: `http://127.0.0.2:${new URL(http.url).port}/refused`,
      TEST_SMTP_PASSWORD: "smtp-password-secret",
    };
    const sub = (applications: string, events: string[], channels: string[], extra: Record<string, unknown> = {}) => ({
      tenant: "untenanted",
      applications,
      events,
      channels,
      ...extra,
    });
    config = await ws.write(
      "manent.yml",
      manentYml((databaseUrl = await pg.createDatabase()), {
        notifications: {
          channels: {
            slack: { type: "slack", url: "env:TEST_SLACK_URL" },
            teams: { type: "teams", url: `file:${ws.path("teams-url")}` },
            hook: {
              type: "webhook",
              url: "env:TEST_HOOK_URL",
              bearer_token: "env:TEST_HOOK_TOKEN",
              templates: {
                succeeded: { subject: "{{application}} {{version}} is out", text: "deployed to {{environment}} by {{kind}} {{id}}" },
              },
            },
            mail: {
              type: "email",
              smtp: {
                host: "127.0.0.1",
                port: smtp.port,
                security: "starttls",
                ca_file: "smtp-ca.pem",
                username: "manent",
                password: "env:TEST_SMTP_PASSWORD",
              },
              from: "manent@example.test",
              to: ["ops@example.test", "oncall@example.test"],
            },
            flaky: { type: "webhook", url: "env:TEST_FLAKY_URL" },
            late: { type: "webhook", url: "env:TEST_LATE_URL" },
            refused: { type: "webhook", url: "env:TEST_REFUSED_URL" },
          },
          subscriptions: [
            sub("notified", ["started", "succeeded"], ["slack", "teams", "hook", "mail"]),
            sub("flaky", ["succeeded"], ["flaky"]),
            sub("late", ["succeeded"], ["late"]),
            sub("refused", ["succeeded"], ["refused"]),
            sub("rb", ["failed", "rolled_back"], ["hook"]),
            sub("gate", ["waiting"], ["slack"]),
            sub("drifty", ["drifted"], ["hook"]),
            sub("rel", ["started", "waiting", "succeeded"], ["hook"], { of: ["release"] }),
          ],
          delivery: { max_attempts: 8, retry_interval: "200ms" },
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir, env });
  });
  after(async () => {
    await server?.stop();
    await http?.stop();
    await smtp?.stop();
    await pg?.stop();
  });

  it("notifies a deploy's start and success to Slack, Teams, a webhook and e-mail, in each one's format", async () => {
    await envconfig("notified", noop("notified"));
    const { id } = await server.api.submit({ descriptor: descriptor("notified", "test", artifact, "1.2.3"), descriptor_file: "n.yml" });
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    const forId = (p: HttpPost) => JSON.stringify(p.body).includes(id);
    // Each channel hears of the deploy's events in their order (notifier.ts), the start's post
    // first, whether the two were claimed in one batch or not.
    const startFirst = (ps: HttpPost[]) => {
      const said = ps.map((p) => (JSON.stringify(p.body).includes("to test started") ? "started" : "succeeded"));
      assert.deepEqual(said, ["started", "succeeded"]);
      return ps;
    };

    const [slackStarted, slackSucceeded] = startFirst(await posts(secret.slack, forId, 2));
    assert.deepEqual(slackSucceeded!.body, {
      text: `deploy of notified 1.2.3 to test succeeded\nThe deploy ${id} of notified (notified) 1.2.3 to test succeeded (tenant untenanted).`,
      blocks: [
        { type: "header", text: { type: "plain_text", text: "deploy of notified 1.2.3 to test succeeded", emoji: false } },
        {
          type: "section",
          text: { type: "mrkdwn", text: `The deploy ${id} of notified (notified) 1.2.3 to test succeeded (tenant untenanted).` },
        },
      ],
    });
    assert.match(String(slackStarted!.body.text), /^deploy of notified 1\.2\.3 to test started\n/);
    assert.equal(slackSucceeded!.headers["content-type"], "application/json");

    const [, teams] = startFirst(await posts(secret.teams, forId, 2));
    assert.deepEqual(teams!.body, {
      type: "message",
      attachments: [
        {
          contentType: "application/vnd.microsoft.card.adaptive",
          contentUrl: null,
          content: {
            $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
            type: "AdaptiveCard",
            version: "1.4",
            body: [
              {
                type: "TextBlock",
                text: "deploy of notified 1.2.3 to test succeeded",
                weight: "Bolder",
                size: "Medium",
                wrap: true,
              },
              {
                type: "TextBlock",
                text: `The deploy ${id} of notified (notified) 1.2.3 to test succeeded (tenant untenanted).`,
                wrap: true,
              },
            ],
          },
        },
      ],
    });

    const [, hook] = startFirst(await posts(secret.hook, forId, 2));
    const { at, sent_at, ...rest } = hook!.body as { at: string; sent_at: string };
    assert.ok(Date.parse(at) <= Date.parse(sent_at), `${at} ${sent_at}`);
    assert.deepEqual(rest, {
      event: "succeeded",
      deploy: {
        id,
        kind: "deploy",
        tenant: "untenanted",
        application: "notified",
        artifact: "notified",
        environment: "test",
        version: "1.2.3",
        status: "succeeded",
        error: null,
      },
      // The channel's own template.
      subject: "notified 1.2.3 is out",
      message: `deployed to test by deploy ${id}`,
    });
    assert.equal(hook!.headers["x-manent-event"], "succeeded");
    assert.equal(hook!.headers.authorization, "Bearer hook-token-secret");

    const mails = await smtp.waitFor((m) => m.mail.text?.includes(id) ?? false, 2);
    const mail = mails.find((m) => m.mail.subject?.endsWith("succeeded"))!;
    assert.equal(mail.secure, true, "the client upgraded with STARTTLS");
    assert.equal(mail.user, "manent");
    assert.equal(mail.from, "manent@example.test");
    assert.deepEqual(mail.to, ["ops@example.test", "oncall@example.test"]);
    assert.equal(mail.mail.subject, "deploy of notified 1.2.3 to test succeeded");
    assert.equal(mail.mail.text?.trim(), `The deploy ${id} of notified (notified) 1.2.3 to test succeeded (tenant untenanted).`);

    for (const channel of ["slack", "teams", "hook", "mail"]) {
      const e = await eventOf(`/api/v1/deploys/${id}/events`, notified("notification.delivered", channel, "succeeded"));
      assert.equal(e.data.attempts, 1);
    }
  });

  it("retries a receiver that answers 500 twice, then records the delivery with its attempts", async () => {
    await envconfig("flaky", noop("flaky"));
    const { id } = await server.api.submit({ descriptor: descriptor("flaky", "test", artifact), descriptor_file: "f.yml" });
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded", "the receiver's failures do not fail the deploy");
    const calls = await posts("/flaky", () => true, 3);
    assert.deepEqual(
      calls.map((c) => [c.answered, (c.body.deploy as { id: string }).id]),
      [
        [500, id],
        [500, id],
        [200, id],
      ],
    );
    const e = await eventOf(`/api/v1/deploys/${id}/events`, notified("notification.delivered", "flaky", "succeeded"));
    assert.deepEqual(e.data, { channel: "flaky", channel_type: "webhook", event: "succeeded", attempts: 3 });
  });

  it("refuses a destination outside the address rules: failed at once, nothing sent, the deploy unaffected", async () => {
    await envconfig("refused", noop("refused"));
    const { id } = await server.api.submit({ descriptor: descriptor("refused", "test", artifact), descriptor_file: "r.yml" });
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    const e = await eventOf(`/api/v1/deploys/${id}/events`, notified("notification.failed", "refused", "succeeded"));
    assert.equal(e.data.attempts, 1);
    assert.match(String(e.data.error), /^notifications\.channels\.refused: host 127\.0\.0\.2 is .*allowed_networks/);
    assert.equal(
      http.items.some((p) => p.path === "/refused"),
      false,
    );
  });

  it("notifies a failed deploy that was rolled back", async () => {
    await envconfig("rb", noop("rb", { targets: [{ host: "r1" }, { host: "r2" }], rollback: { enabled: true } }));
    const first = await server.api.submit({ descriptor: descriptor("rb", "test", artifact, "1.0.0"), descriptor_file: "rb.yml" });
    assert.equal((await server.api.deploy(first.id, 60)).status, "succeeded");
    await envconfig(
      "rb",
      noop("rb", {
        targets: [{ host: "r1" }, { host: "r2" }],
        rollback: { enabled: true },
        params: { state_dir: ws.path("state-rb"), fail_hosts: "r2" },
      }),
    );
    const second = await server.api.submit({ descriptor: descriptor("rb", "test", artifact, "2.0.0"), descriptor_file: "rb.yml" });
    assert.equal((await server.api.deploy(second.id, 60)).status, "rolled_back");
    const [hook] = await posts(secret.hook, (p) => (p.body.deploy as { id?: string } | undefined)?.id === second.id);
    assert.equal(hook!.body.event, "rolled_back");
    assert.match(
      String(hook!.body.message),
      new RegExp(
        `^The deploy ${second.id} of rb 2\\.0\\.0 to test failed and was rolled back \\(tenant untenanted\\): target r2: failing as configured`,
      ),
    );
  });

  it("notifies a canary waiting for an approval, with how to give it", async () => {
    await envconfig(
      "gate",
      noop("gate", { rollout: { canary: { steps: [{ set_weight: 10 }, { approval: {} }, { set_weight: 100 }] } } }),
      "test",
    );
    const { id } = await server.api.submit({ descriptor: descriptor("gate", "test", artifact, "3.0.0"), descriptor_file: "g.yml" });
    const [slack] = await posts(secret.slack, (p) => String(p.body.text).includes(id));
    assert.match(
      String(slack!.body.text),
      new RegExp(`^deploy of gate 3\\.0\\.0 to test is waiting\\n.*: waiting for approval: manent approve ${id}`),
    );
    await server.api.rolloutCommand(id, "approve");
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
  });

  it("notifies drift found by a periodic check, naming the drifted targets", async () => {
    await envconfig("drifty", noop("drifty", { drift: { interval: "1s" } }));
    const { id } = await server.api.submit({ descriptor: descriptor("drifty", "test", artifact, "1.0.0"), descriptor_file: "d.yml" });
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    await writeFile(ws.path("state-drifty", "drifty-1.release"), "0.9.0");
    const [hook] = await posts(secret.hook, (p) => p.body.event === "drifted" && (p.body.deploy as { id: string }).id === id);
    assert.deepEqual(hook!.body.drifted, ["drifty-1"]);
    assert.equal(hook!.body.subject, "drift found: drifty in test");
  });

  it("notifies a release's start, its wait for a promotion and its success", async () => {
    for (const environment of ["dev", "staging"]) await envconfig("rel", noop("rel"), environment);
    await ws.write("envconfig/untenanted/rel/pipeline.yml", {
      stages: [{ environment: "dev" }, { environment: "staging", promotion: "manual" }],
    });
    const { id } = await server.api.startRelease({ descriptor: descriptor("rel", "dev", artifact, "4.0.0"), descriptor_file: "rel.yml" });
    const ofRelease = (p: HttpPost) => (p.body.release as { id?: string } | undefined)?.id === id;
    const [started, waiting] = await posts(secret.hook, ofRelease, 2);
    assert.deepEqual(
      [started!.body.event, waiting!.body.event, (waiting!.body.release as { environment: string }).environment],
      ["started", "waiting", "dev, staging"],
    );
    assert.equal(waiting!.body.hint, `waiting for promotion: manent release promote ${id} --to staging`);
    await server.api.releaseCommand(id, "promote", "staging");
    const [, , succeeded] = await posts(secret.hook, ofRelease, 3);
    assert.equal(succeeded!.body.event, "succeeded");
    const e = await eventOf(`/api/v1/releases/${id}/events`, notified("notification.delivered", "hook", "succeeded"));
    assert.equal(e.data.attempts, 1);
  });

  it("delivers after the server was killed with the notification pending", async () => {
    await envconfig("late", noop("late"));
    const from = server.logs().length;
    const { id } = await server.api.submit({ descriptor: descriptor("late", "test", artifact), descriptor_file: "l.yml" });
    assert.equal((await server.api.deploy(id, 60)).status, "succeeded");
    await server.logged(/"channel":"late".*"msg":"notification attempt failed: retried later"/, from);
    pastLogs += server.logs();
    await server.kill();
    http.answer("/late", 200);
    server = await startServer(config, { cwd: ws.dir, env });
    const [delivered] = await posts("/late", (p) => p.answered === 200);
    assert.equal((delivered!.body.deploy as { id: string }).id, id);
    const e = await eventOf(`/api/v1/deploys/${id}/events`, notified("notification.delivered", "late", "succeeded"));
    assert.ok((e.data.attempts as number) >= 2, JSON.stringify(e.data));
  });

  it("keeps the channels' secrets out of the logs and the database (the outbox and the events included)", async () => {
    const seen = pastLogs + server.logs() + (await databaseText(databaseUrl));
    assert.match(seen, /notification\.delivered/);
    for (const s of [...Object.values(secret), "smtp-password-secret", "hook-token-secret"]) assert.equal(seen.includes(s), false, s);
  });
});
