import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { after, before, describe, it } from "node:test";
import { chromium } from "playwright-core";
import { tlsFetch } from "../../src/cli/tls-transport.js";
import { TestPostgres } from "../support/postgres.js";
import { runCli, serverBin, startServer, type CliResult, type ServerProcess, logMessages } from "../support/server-process.js";
import { TestCa, type Issued } from "../support/test-ca.js";
import { createWorkspace, manentYml, type Workspace } from "../support/workspace.js";

const token = "tls-test-token-7";
const tokens = { tokens: [{ name: "ci", tenant: "*", sha256: createHash("sha256").update(token).digest("hex") }] };

/** The serial number of the certificate a TLS server presents to a new connection. */
async function servedSerial(url: string, ca: string): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), ca });
  try {
    await once(socket, "secureConnect");
    return socket.getPeerCertificate().serialNumber;
  } finally {
    socket.destroy();
  }
}

/** Replaces a file the way tools that rotate certificates do: a new file renamed over the old one. */
async function replace(path: string, text: string): Promise<void> {
  await writeFile(`${path}.new`, text);
  await rename(`${path}.new`, path);
}

/** Runs `manent-server serve` expecting it to refuse to start; its exit code and stderr. */
async function refusedStart(ws: Workspace, config: object, ...args: string[]): Promise<{ code: number | null; stderr: string }> {
  const file = await ws.write("manent.yml", config);
  const child = spawn(process.execPath, [serverBin, "-c", file, "serve", ...args], { cwd: ws.dir, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  assert.equal(existsSync(ws.path("work")), false, "the server created its workdir before refusing");
  // As an operator reads the JSON log (jq -r .msg), and the raw log for what must never be in it.
  return { code, stderr: `${logMessages(stderr)}\n${stderr}` };
}

/** manent-server serving HTTPS from manent.yml `tls`: the CLI verifies it against a CA, mutual TLS, reloads, refusals. */
describe("HTTPS", () => {
  let pg: TestPostgres;
  let ca: TestCa;
  let otherCa: TestCa;

  before(async () => {
    [pg, ca, otherCa] = await Promise.all([TestPostgres.start(), TestCa.create("manent-test-ca"), TestCa.create("another-ca")]);
  });
  after(async () => {
    await pg?.stop();
  });

  describe("a server with tls.cert_file", () => {
    let ws: Workspace;
    let server: ServerProcess;
    let first: Issued;
    let deployId: string;
    const cli = (args: string[], env: Record<string, string> = {}): Promise<CliResult> =>
      runCli(args, { cwd: ws.dir, server: server.url, token, env });

    before(async () => {
      ws = await createWorkspace();
      first = await ca.server();
      await Promise.all([
        ws.write("tls/server.crt", first.certPem),
        ws.write("tls/server.key", first.keyPem),
        ws.write("ca.crt", ca.certPem),
        ws.write("other-ca.crt", otherCa.certPem),
        ws.write("dist/app.txt", "one\n"),
        ws.write("envconfig/untenanted/web/web/test.yml", {
          plugin: "noop",
          targets: [{ host: "web-1" }],
          params: { state_dir: ws.path("state"), journal: ws.path("journal") },
        }),
        ws.write("web.yml", {
          apiVersion: "manent/v1",
          application: "web",
          environment: "test",
          artifact: { type: "file", name: "web", version: "1.0.0", source: "dist/app.txt" },
        }),
      ]);
      const config = await ws.write(
        "manent.yml",
        manentYml(await pg.createDatabase(), { auth: tokens, tls: { cert_file: "tls/server.crt", key_file: "tls/server.key" } }),
      );
      server = await startServer(config, { cwd: ws.dir, token, fetch: await tlsFetch({ caFile: ws.path("ca.crt") }) });
    });
    after(async () => {
      await server?.stop();
    });

    it("answers https:// with the configured certificate, TLS 1.2 or newer", async () => {
      assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
      assert.equal((await server.api.whoami()).name, "ci");
      assert.equal(await servedSerial(server.url, ca.certPem), first.serial);
      const { hostname, port } = new URL(server.url);
      const old = connect({ host: hostname, port: Number(port), ca: ca.certPem, minVersion: "TLSv1", maxVersion: "TLSv1.1" });
      const [refused] = (await once(old, "error").finally(() => old.destroy())) as [NodeJS.ErrnoException];
      assert.match(refused.code ?? "", /ERR_SSL_/);
    });

    it("deploys through the CLI with --ca-file, and shows the deploy with MANENT_CA_FILE", async () => {
      // As a script would: stdout is a pipe, so each answer is the deploy as JSON.
      const deployed = await cli(["--ca-file", ws.path("ca.crt"), "deploy", "-f", ws.path("web.yml")]);
      assert.equal(deployed.code, 0, deployed.stdout + deployed.stderr);
      const d = JSON.parse(deployed.stdout) as { id: string; status: string };
      assert.equal(d.status, "succeeded");
      const id = (deployId = d.id);
      const status = await cli(["status", id], { MANENT_CA_FILE: ws.path("ca.crt") });
      assert.equal(status.code, 0, status.stderr);
      assert.deepEqual(JSON.parse(status.stdout) as unknown, { ...(JSON.parse(status.stdout) as object), id, status: "succeeded" });
      const watched = await cli(["status", "--watch", id], { MANENT_CA_FILE: ws.path("ca.crt") });
      assert.equal(watched.code, 0, watched.stderr);
    });

    it("exits 3 naming the server, the reason and --ca-file when the certificate does not verify", async () => {
      for (const caFile of [undefined, ws.path("other-ca.crt")]) {
        const r = await cli([...(caFile ? ["--ca-file", caFile] : []), "history"]);
        assert.equal(r.code, 3, r.stdout + r.stderr);
        assert.equal(r.stdout, "");
        assert.match(
          r.stderr,
          new RegExp(
            `^manent: the TLS certificate of ${server.url.replace(/\./g, "\\.")} does not verify: .*(self-signed certificate in certificate chain|unable to verify|unable to get local issuer).*; if a private CA signed it, give that CA's certificate with --ca-file or MANENT_CA_FILE\\n$`,
          ),
        );
      }
    });

    it("refuses a --ca-file that cannot be read (exit 2)", async () => {
      const r = await cli(["--ca-file", ws.path("missing.crt"), "history"]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--ca-file .*missing\.crt: cannot read: ENOENT/);
    });

    it("fails cleanly for plain http:// to the TLS port, saying the server may serve https://", async () => {
      const r = await runCli(["history"], { cwd: ws.dir, server: server.url.replace("https:", "http:"), token });
      assert.equal(r.code, 3, r.stderr);
      assert.match(
        r.stderr,
        /^manent: cannot reach manent-server at http:\/\/127\.0\.0\.1:\d+ \(.+\); is it running\? .*serves https:\/\//,
      );
    });

    it("serves the web UI over HTTPS to a browser that trusts the certificate", async () => {
      // Chromium trusts exactly this certificate's key (the flag needs a profile directory of its own).
      const spki = createHash("sha256")
        .update(new X509Certificate(first.certPem).publicKey.export({ type: "spki", format: "der" }))
        .digest("base64");
      const profile = await mkdtemp(join(tmpdir(), "manent-chromium-"));
      const browser = await chromium.launchPersistentContext(profile, {
        executablePath: "/usr/bin/chromium",
        headless: true,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", `--ignore-certificate-errors-spki-list=${spki}`],
      });
      try {
        const page = await browser.newPage();
        await page.goto(server.url);
        await page.getByLabel("API token").fill(token);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.getByRole("heading", { name: "Overview" }).waitFor();
        await page.getByRole("link", { name: "Deploys" }).click();
        await page.locator(`tr[data-deploy="${deployId}"]`).waitFor();
        assert.equal(new URL(page.url()).protocol, "https:");
      } finally {
        await browser.close();
        await rm(profile, { recursive: true, force: true });
      }
    });

    it("serves a replaced certificate without a restart, and keeps it when the next pair is bad", async () => {
      const second = await ca.server();
      let from = server.logs().length;
      await replace(ws.path("tls/server.key"), second.keyPem);
      await replace(ws.path("tls/server.crt"), second.certPem);
      await server.logged(
        new RegExp(
          `"msg":"tls certificate reloaded".*"serial":"${second.serial}"|"serial":"${second.serial}".*"msg":"tls certificate reloaded"`,
        ),
        from,
      );
      assert.equal(await servedSerial(server.url, ca.certPem), second.serial);

      // A key that is not the certificate's: logged, and the server keeps presenting the second one.
      from = server.logs().length;
      await replace(ws.path("tls/server.key"), (await ca.server()).keyPem);
      const warning = await server.logged(/the changed certificate files were refused/, from);
      assert.match(warning, /tls\.key_file: .*server\.key: .*key values mismatch/);
      assert.doesNotMatch(warning, /PRIVATE KEY/);
      assert.equal(await servedSerial(server.url, ca.certPem), second.serial);
      assert.equal((await server.api.whoami()).name, "ci");
    });
  });

  describe("a server with tls.client_ca_file (mutual TLS)", () => {
    let ws: Workspace;
    let server: ServerProcess;

    before(async () => {
      ws = await createWorkspace();
      const [serving, clientCa] = await Promise.all([ca.server(), TestCa.create("manent-clients")]);
      const [client, stranger] = await Promise.all([clientCa.client("ci-runner"), otherCa.client("stranger")]);
      await Promise.all([
        ws.write("tls/server.crt", serving.certPem),
        ws.write("tls/server.key", serving.keyPem),
        ws.write("tls/clients.crt", clientCa.certPem),
        ws.write("ca.crt", ca.certPem),
        ws.write("client.crt", client.certPem),
        ws.write("client.key", client.keyPem),
        ws.write("stranger.crt", stranger.certPem),
        ws.write("stranger.key", stranger.keyPem),
      ]);
      const config = await ws.write(
        "manent.yml",
        manentYml(await pg.createDatabase(), {
          auth: tokens,
          tls: { cert_file: "tls/server.crt", key_file: "tls/server.key", client_ca_file: "tls/clients.crt" },
        }),
      );
      const fetch = await tlsFetch({ caFile: ws.path("ca.crt"), certFile: ws.path("client.crt"), keyFile: ws.path("client.key") });
      server = await startServer(config, { cwd: ws.dir, token, fetch });
    });
    after(async () => {
      await server?.stop();
    });

    it("answers a client whose certificate the client CA signed (MANENT_CLIENT_CERT, MANENT_CLIENT_KEY)", async () => {
      const r = await runCli(["history"], {
        cwd: ws.dir,
        server: server.url,
        token,
        env: { MANENT_CA_FILE: ws.path("ca.crt"), MANENT_CLIENT_CERT: ws.path("client.crt"), MANENT_CLIENT_KEY: ws.path("client.key") },
      });
      assert.equal(r.code, 0, r.stderr);
    });

    it("refuses a client without a certificate, or with one another CA signed (exit 3, naming --cert-file)", async () => {
      for (const cert of [[], ["--cert-file", ws.path("stranger.crt"), "--key-file", ws.path("stranger.key")]]) {
        const r = await runCli(["--ca-file", ws.path("ca.crt"), ...cert, "history"], { cwd: ws.dir, server: server.url, token });
        assert.equal(r.code, 3, r.stdout + r.stderr);
        assert.match(r.stderr, /^manent: .*127\.0\.0\.1.*--cert-file and --key-file/, r.stderr);
      }
    });

    it("refuses --cert-file without --key-file (exit 2)", async () => {
      const r = await runCli(["--cert-file", ws.path("client.crt"), "history"], { cwd: ws.dir, server: server.url, token });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--cert-file needs --key-file/);
    });
  });

  describe("start-up", () => {
    it("refuses plain HTTP on a non-loopback address, naming manent.yml's tls", async () => {
      const ws = await createWorkspace();
      const fromFile = await refusedStart(ws, manentYml(undefined, { auth: tokens, listen: "0.0.0.0:0" }));
      assert.equal(fromFile.code, 2, fromFile.stderr);
      assert.match(
        fromFile.stderr,
        /manent\.yml: tls: listen: 0\.0\.0\.0:0 is not a loopback address and no tls is configured.*Set tls\.cert_file and tls\.key_file.*tls: \{behind_proxy: true\}/,
      );
      const fromFlag = await refusedStart(ws, manentYml(undefined, { auth: tokens }), "--listen", "0.0.0.0:0");
      assert.equal(fromFlag.code, 2, fromFlag.stderr);
      assert.match(fromFlag.stderr, /manent\.yml: tls: --listen 0\.0\.0\.0:0 is not a loopback address/);
    });

    it("listens on the IPv6 loopback in plain HTTP, and refuses the IPv6 any-address without tls", async () => {
      const ws = await createWorkspace();
      const config = await ws.write("manent.yml", manentYml(await pg.createDatabase(), { auth: tokens, listen: "[::1]:0" }));
      const server = await startServer(config, { cwd: ws.dir, token, freePort: false });
      try {
        assert.match(server.url, /^http:\/\/\[::1\]:\d+$/);
        const r = await runCli(["history"], { cwd: ws.dir, server: server.url, token });
        assert.equal(r.code, 0, r.stderr);
      } finally {
        await server.stop();
      }
      const refused = await createWorkspace();
      const any = await refusedStart(refused, manentYml(undefined, { auth: tokens, listen: "[::]:0" }));
      assert.equal(any.code, 2, any.stderr);
      assert.match(any.stderr, /manent\.yml: tls: listen: \[::\]:0 is not a loopback address/);
      for (const listen of ["::1:8080", "[::1]", "127.0.0.1:70000"]) {
        const bad = await refusedStart(refused, manentYml(undefined, { auth: tokens, listen }));
        assert.equal(bad.code, 2, bad.stderr);
        assert.match(bad.stderr, /manent\.yml: listen: (must be "host:port"|the port must be at most 65535)/);
      }
    });

    it("listens in plain HTTP on a non-loopback address when manent.yml declares a TLS proxy in front", async () => {
      const ws = await createWorkspace();
      const config = await ws.write(
        "manent.yml",
        manentYml(await pg.createDatabase(), { auth: tokens, listen: "0.0.0.0:0", tls: { behind_proxy: true } }),
      );
      const server = await startServer(config, { cwd: ws.dir, token, freePort: false });
      try {
        assert.match(server.url, /^http:\/\/0\.0\.0\.0:\d+$/);
        const r = await runCli(["history"], { cwd: ws.dir, server: server.url.replace("0.0.0.0", "127.0.0.1"), token });
        assert.equal(r.code, 0, r.stderr);
      } finally {
        await server.stop();
      }
    });

    it("refuses unreadable or mismatched certificate files and incomplete tls sections (exit 2, naming the field)", async () => {
      const ws = await createWorkspace();
      const [a, b] = await Promise.all([ca.server(), ca.server()]);
      await Promise.all([ws.write("a.crt", a.certPem), ws.write("b.key", b.keyPem), ws.write("junk.crt", "not a certificate\n")]);
      const cases: [object, RegExp][] = [
        [{ cert_file: "missing.crt", key_file: "b.key" }, /manent\.yml: tls\.cert_file: cannot read .*missing\.crt: ENOENT/],
        [{ cert_file: "junk.crt", key_file: "b.key" }, /manent\.yml: tls\.cert_file: .*junk\.crt: /],
        [{ cert_file: "a.crt", key_file: "b.key" }, /manent\.yml: tls\.key_file: .*b\.key: .*key values mismatch/],
        [{ cert_file: "a.crt" }, /manent\.yml: tls\.key_file: cert_file needs its key_file/],
        [
          { client_ca_file: "a.crt", behind_proxy: true },
          /manent\.yml: tls\.client_ca_file: mutual TLS needs the server's own certificate/,
        ],
        [{}, /manent\.yml: tls: give cert_file and key_file .*or behind_proxy: true/],
      ];
      for (const [tls, message] of cases) {
        const r = await refusedStart(ws, manentYml(undefined, { auth: tokens, tls }));
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, message);
        assert.doesNotMatch(r.stderr, /PRIVATE KEY/);
      }
    });
  });
});
