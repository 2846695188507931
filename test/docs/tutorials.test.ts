import { execFileSync } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { repoRoot } from "../support/server-process.js";
import { startSshHosts, type SshdServer } from "../support/sshd/index.js";
import { startActionsTokenEndpoint } from "../support/actions-token-endpoint.js";
import { WebhookReceiver } from "../support/notification-receivers.js";
import { githubJobClaims, startOidcProvider } from "../support/oidc-provider.js";
import { baseSetup, linkGoCaches, portLock, testPage } from "./page-test.js";

/** The tutorials that need no Kubernetes: run as the reader would, against real servers. */

// The quickstart's files, run by hand. Its workdir and targets (in examples/quickstart) are
// shared with test/quickstart.test.ts, which holds the same port lock while it uses them.
testPage("docs/getting-started.md", () => baseSetup(repoRoot));

// Two real sshd "hosts" on loopback addresses, letting the deploy user in with a generated key:
// the page tells the reader to export their hosts' names in these variables.
testPage("docs/tutorials/remote-copy-ssh.md", async (defer) => {
  const base = await baseSetup();
  const hosts = await startSshHosts(2);
  defer(() => hosts.close());
  const [web1, web2] = hosts.servers as [SshdServer, SshdServer];
  await mkdir(join(base.home, ".ssh"), { recursive: true, mode: 0o700 });
  await writeFile(join(base.home, ".ssh/manent_deploy"), hosts.userKey.privateKey, { mode: 0o600 });
  return {
    ...base,
    env: {
      ...base.env,
      WEB1: web1.host,
      WEB1_PORT: String(web1.port),
      WEB2: web2.host,
      WEB2_PORT: String(web2.port),
      DEPLOY_USER: hosts.user.name,
      // Both "hosts" are this machine: {host} keeps their releases apart.
      DEPLOY_BASE: join(await hosts.ownedDir("hello"), "{host}"),
    },
  };
});

// The sample plugins of examples/, built and run through manent from the repository's root.
testPage("docs/tutorials/external-plugin.md", async () => {
  const base = await baseSetup(repoRoot);
  // The reader's Go caches; the session's temporary HOME would otherwise start them cold.
  await linkGoCaches(base.home);
  return base;
});

// The canary quickstart's files, HAProxy and fixed ports: shared with test/canary-quickstart.test.ts
// under its lock. The page stops HAProxy and the slots itself; this does too when it failed midway.
testPage("docs/tutorials/canary-analysis.md", async (defer) => {
  defer(() =>
    execFileSync("bash", [
      "-c",
      'for f in /tmp/manent-canary-quickstart/haproxy.pid /tmp/manent-canary-quickstart/*/run/*.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; true',
    ]),
  );
  return { ...(await baseSetup(repoRoot)), wrapper: ["flock", "-o", "/tmp/manent-canary-quickstart.lock"] };
});

testPage("docs/tutorials/sign-in-oidc.md", async () => {
  const base = await baseSetup(repoRoot);
  // The reader's browser, which `manent login` opens: signs in on the provider's page as the page says.
  // (xdg-open, as on a Linux desktop, first on the reader's PATH: this machine's own opens nothing).
  const desktop = join(base.home, "..", "desktop-bin");
  await mkdir(desktop, { recursive: true });
  await writeFile(join(desktop, "xdg-open"), `#!/bin/sh\ncd ${repoRoot} && exec node --import tsx test/docs/reader-browser.ts "$@"\n`, {
    mode: 0o755,
  });
  return { ...base, env: { ...base.env, PATH: `${desktop}:${base.env.PATH}` } };
});

// The backup, restore and upgrade procedure on the embedded Postgres, on its own port (8097).
testPage("docs/operations/backup-and-restore.md", async () => ({ ...(await baseSetup()), wrapper: portLock(8097) }));

// The quickstart's files through three environments, copied to the session's home.
testPage("docs/tutorials/release-through-environments.md", async () => baseSetup(repoRoot));

// The quickstart's envconfig moved into a git repository on this machine, read by the git provider.
testPage("docs/tutorials/configuration-from-git.md", async () => baseSetup(repoRoot));
testPage("docs/operations/deploy-windows.md", async () => baseSetup(repoRoot));

// The quickstart's files with an SSH signature policy; the reader's key made by ssh-keygen on the page.
testPage("docs/operations/verified-artifacts.md", async () => baseSetup(repoRoot));

// The quickstart's files with a Slack channel: a real HTTP receiver on loopback stands for Slack's
// incoming webhook, whose URL the page tells the reader to export.
testPage("docs/operations/notifications.md", async (defer) => {
  const base = await baseSetup(repoRoot);
  const slack = new WebhookReceiver();
  await slack.start();
  defer(() => slack.stop());
  return { ...base, env: { ...base.env, SLACK_WEBHOOK_URL: slack.answer("/services/T000/B000/XXXXXXXX", 200) } };
});

// The quickstart's files with a trust policy for GitHub Actions jobs: a real OpenID provider mints
// GitHub-shaped ID tokens (a job of acme/shop in environment test), handed out by an endpoint that
// answers as a runner's ACTIONS_ID_TOKEN_REQUEST_URL does; the page tells the reader to export both.
testPage("docs/operations/ci-workload-identity.md", async (defer) => {
  const base = await baseSetup(repoRoot);
  const github = await startOidcProvider({ client: { id: "unused", secret: "unused-secret" }, jobAudiences: ["http://127.0.0.1:8080"] });
  defer(() => github.close());
  const runner = await startActionsTokenEndpoint(github, githubJobClaims("acme/shop", "refs/heads/main", "test"));
  defer(() => runner.close());
  return {
    ...base,
    env: {
      ...base.env,
      CI_ISSUER: github.issuer,
      ACTIONS_ID_TOKEN_REQUEST_URL: runner.requestUrl,
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: runner.requestToken,
    },
  };
});
