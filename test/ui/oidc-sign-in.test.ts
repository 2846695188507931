import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import type { BrowserContext, Page } from "playwright-core";
import { databaseText } from "../support/database-text.js";
import { launchChromium, signInAtProvider } from "../support/browser.js";
import { startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.js";
import { TestPostgres } from "../support/postgres.js";
import { startServer, type ServerProcess } from "../support/server-process.js";
import { createWorkspace, descriptor, manentYml, type Workspace } from "../support/workspace.js";

const clientSecret = "ui-oidc-client-secret-93b1e0";

/**
 * Signing in to the web UI through a real OpenID provider's login page, in a real Chromium: the
 * session cookie, CSRF protection of changes, a key rotation at the provider, sign-out.
 */
describe("web UI sign-in with OpenID Connect", () => {
  let pg: TestPostgres;
  let databaseUrl: string;
  let ws: Workspace;
  let provider: RunningOidcProvider;
  let server: ServerProcess;
  let chromium: Awaited<ReturnType<typeof launchChromium>>;
  /** Alice's browser. */
  let context: BrowserContext;
  let page: Page;
  let sessionId = "";
  /** Pages of another origin of the same site (127.0.0.1, another port): the browser sends SameSite=Lax cookies with their requests. */
  let elsewhere: Server;
  let elsewhereUrl = "";
  let elsewherePage = "";

  const sessionCookies = async () => {
    const cookies = await context.cookies(server.url);
    return { session: cookies.find((c) => c.name === "manent_session"), csrf: cookies.find((c) => c.name === "manent_csrf") };
  };

  before(async () => {
    pg = await TestPostgres.start();
    databaseUrl = await pg.createDatabase();
    ws = await createWorkspace();
    await ws.write("dist/app.txt", "ui\n");
    provider = await startOidcProvider({ client: { id: "manent-ui", secret: clientSecret } });
    const config = await ws.write(
      "manent.yml",
      manentYml(databaseUrl, {
        auth: {
          tokens: [],
          grants: [{ role: "deployer", groups: ["deployers"] }],
          oidc: { issuer: provider.issuer, name: "Acme SSO", client_id: "manent-ui", client_secret: "env:OIDC_SECRET", session_ttl: "1h" },
        },
      }),
    );
    server = await startServer(config, { cwd: ws.dir, env: { OIDC_SECRET: clientSecret } });
    provider.setRedirectUris([`${server.url}/auth/callback`]);
    elsewhere = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(elsewherePage));
    await new Promise<void>((r) => elsewhere.listen(0, "127.0.0.1", r));
    elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/`;
    chromium = await launchChromium();
    context = await chromium.browser.newContext();
    page = await context.newPage();
  });
  after(async () => {
    await chromium?.close();
    elsewhere?.close();
    await server?.stop();
    await provider?.close();
    await pg?.stop();
  });

  it("signs in through the provider's login page and keeps an HttpOnly, SameSite session cookie", async () => {
    // Session fixation: a session id planted before sign-in must not be the one signed in.
    const planted = "planted-by-an-attacker";
    await page.context().addCookies([{ name: "manent_session", value: planted, url: server.url }]);
    await page.goto(server.url);
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).waitFor();
    // The provider first; an API token only when asked for.
    assert.equal(await page.getByLabel("API token").isVisible(), false, "the token field is shown beside the provider");
    await page.getByText("Sign in with an API token instead").click();
    await page.getByLabel("API token").waitFor();
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).click();
    // The provider's own page.
    await page.waitForURL(`${provider.issuer}/**`);
    await signInAtProvider(page, "alice");
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    assert.match(await page.locator(".who").innerText(), /alice@example\.com/);

    const { session, csrf } = await sessionCookies();
    assert.ok(session && csrf);
    assert.notEqual(session.value, planted, "the session id planted before sign-in was kept");
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, "Lax");
    // Plain http on loopback: not Secure (the browser would not send it back); Secure everywhere else (docs/operations/security.md).
    assert.equal(session.secure, false);
    assert.equal(csrf.httpOnly, false);
    sessionId = session.value;
    const expiresIn = session.expires - Date.now() / 1000;
    assert.ok(expiresIn > 3000 && expiresIn <= 3600, `the cookie lasts the session_ttl (1h), not ${expiresIn} s`);
  });

  it("refuses a cross-site POST that carries the session cookie, and accepts the UI's own", async () => {
    // A page of another origin posts a deploy to manent with a form, as a CSRF attack does.
    elsewherePage = `<form id="f" method="post" action="${server.url}/api/v1/deploys"><input name="descriptor" value="x"></form>
      <script>document.getElementById("f").submit()</script>`;
    const attacked = await context.newPage();
    const answer = attacked.waitForResponse(`${server.url}/api/v1/deploys`);
    await attacked.goto(elsewhereUrl);
    const response = await answer;
    // The browser did send the cookie (same site), and manent refused the change.
    assert.match((await response.request().allHeaders()).cookie ?? "", /manent_session=/);
    assert.equal(response.status(), 403);
    assert.match(await response.text(), /cross-site request refused: Origin http:\/\/127\.0\.0\.1:\d+ is not this server/);
    await attacked.close();

    // The same from a script of that page (fetch with the cookie, no CSRF token): refused too.
    const scripted = await context.newPage();
    elsewherePage = "<p>elsewhere</p>";
    await scripted.goto(elsewhereUrl);
    const status = await scripted.evaluate(
      (url) => fetch(url, { method: "POST", credentials: "include", mode: "no-cors", body: "{}" }).then((r) => r.status),
      `${server.url}/api/v1/deploys`,
    );
    assert.equal(status, 0, "an opaque answer: the request was not let through CORS");
    await scripted.close();

    // No deploy was made by either.
    const listed = await page.evaluate(() => fetch("/api/v1/deploys").then((r) => r.json() as Promise<{ deploys: unknown[] }>));
    assert.deepEqual(listed.deploys, []);

    // A cookie-carrying request without the token, or with another one, from a client that sends no Origin: refused as well.
    for (const csrf of [undefined, "forged"]) {
      const res = await fetch(`${server.url}/api/v1/deploys`, {
        method: "POST",
        headers: { cookie: `manent_session=${sessionId}`, "content-type": "application/json", ...(csrf && { "x-manent-csrf": csrf }) },
        body: JSON.stringify({ descriptor: descriptor("shop", "test", "dist/app.txt") }),
      });
      assert.equal(res.status, 403);
      assert.match(await res.text(), /missing or wrong x-manent-csrf header/);
    }
  });

  it("keeps the session while the provider rotates its signing key", async () => {
    await provider.rotateKeys();
    await page.reload();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    assert.match(await page.locator(".who").innerText(), /alice@example\.com/);
  });

  it("signs out: the session ends on the server, its cookie no longer signs in", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).waitFor();
    const res = await fetch(`${server.url}/api/v1/whoami`, { headers: { cookie: `manent_session=${sessionId}` } });
    assert.equal(res.status, 401);
    assert.match(await res.text(), /session expired or ended/);
    assert.equal((await sessionCookies()).session, undefined);
  });

  it("refuses a replayed callback, and a callback whose state is another browser's sign-in (login CSRF), setting no session", async () => {
    // A second browser of alice's signs in; the callback URL the provider sent it to is kept.
    const other = await chromium.browser.newContext();
    const attacker = await chromium.browser.newContext();
    try {
      const otherPage = await other.newPage();
      let callback = "";
      otherPage.on("request", (r) => {
        if (r.url().startsWith(`${server.url}/auth/callback`) && callback === "") callback = r.url();
      });
      await otherPage.goto(server.url);
      await otherPage.getByRole("link", { name: "Sign in with Acme SSO" }).click();
      await otherPage.waitForURL(`${provider.issuer}/**`);
      await signInAtProvider(otherPage, "alice");
      await otherPage.getByRole("heading", { name: "Overview" }).waitFor();
      assert.match(callback, /[?&]state=[^&]+/);
      const signedIn = (await other.cookies(server.url)).find((c) => c.name === "manent_session")!.value;

      // Replayed in the same browser: its sign-in is over, so the callback is refused and the session stays the one it had.
      const replay = await otherPage.goto(callback);
      assert.equal(replay?.status(), 401);
      assert.match(await replay!.text(), /sign-in refused: no sign-in in progress/);
      assert.equal((await other.cookies(server.url)).find((c) => c.name === "manent_session")?.value, signedIn);

      // A browser with a sign-in of its own in progress, sent that callback (another sign-in's state and code): refused, no session.
      const attackerPage = await attacker.newPage();
      await attackerPage.goto(server.url);
      await attackerPage.getByRole("link", { name: "Sign in with Acme SSO" }).click();
      await attackerPage.waitForURL(`${provider.issuer}/**`);
      const swapped = await attackerPage.goto(callback);
      assert.equal(swapped?.status(), 401);
      assert.match(await swapped!.text(), /state/i);
      assert.equal(
        (await attacker.cookies(server.url)).find((c) => c.name === "manent_session"),
        undefined,
      );
    } finally {
      await other.close();
      await attacker.close();
    }
  });

  it("writes no session id nor client secret to its log or its database, and audits the sign-in and sign-out", async () => {
    const db = await databaseText(databaseUrl);
    assert.match(db, /alice@example\.com.*sign_in.*ok/);
    assert.match(db, /alice@example\.com.*sign_out.*ok/);
    for (const [what, value] of [
      ["the session id", sessionId],
      ["the client secret", clientSecret],
    ] as const) {
      assert.ok(!db.includes(value), `${what} is in the database`);
      assert.ok(!server.logs().includes(value), `${what} is in the server's log`);
    }
  });
});
