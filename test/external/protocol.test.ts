import assert from "node:assert/strict";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { PassThrough, Writable } from "node:stream";
import { describe, it } from "node:test";
import { forwardStderr } from "../../src/external/host/stderr-forwarder.js";
import { Code, ManentError } from "../../src/plugin.js";
import { ResultError } from "../../src/core/contract/result-error.js";
import { parseExternalEntry } from "../../src/external/host/config.js";
import { pluginEnvironment } from "../../src/external/host/environment.js";
import { formatHandshake, parseHandshake } from "../../src/external/protocol/handshake.js";
import { formatHclogLine, parseHclogLine } from "../../src/external/protocol/hclog.js";
import { decodeRawBase64, encodeRawBase64, generateIdentity } from "../../src/external/protocol/mtls.js";
import { fromServiceError, toStatus } from "../../src/external/protocol/wire-errors.js";
import { createLogger } from "../../src/server/logger.js";
import { parseDocument } from "yaml";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";

describe("handshake line", () => {
  it("round-trips a go-plugin line with a raw base64 certificate", async () => {
    const id = await generateIdentity();
    const raw = encodeRawBase64(id.der);
    assert.ok(!raw.endsWith("="), "no padding, like base64.RawStdEncoding");
    const line = formatHandshake({ network: "unix", address: "/tmp/p.sock", serverCertRaw64: raw });
    assert.match(line, /^1\|1\|unix\|\/tmp\/p\.sock\|grpc\|[A-Za-z0-9+/]+\n$/);
    const hs = parseHandshake(line, "p");
    assert.equal(hs.network, "unix");
    assert.equal(hs.address, "/tmp/p.sock");
    assert.deepEqual(hs.serverCert, id.der);
  });

  it("generates certificates like go-plugin: ECDSA (P-256), localhost, CA, client and server auth", async () => {
    const id = await generateIdentity();
    const cert = new X509Certificate(id.certPem);
    assert.equal(cert.ca, true);
    assert.match(cert.subjectAltName ?? "", /DNS:localhost/);
    assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
    assert.deepEqual(new Set(cert.keyUsage), new Set(["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]));
    assert.ok(cert.checkPrivateKey(createPrivateKey(id.keyPem)));
  });

  const bad: [string, string, RegExp][] = [
    ["junk", "hello world", /plugin p: unrecognized handshake on stdout: "hello world"/],
    ["core version", "2|1|unix|/x|grpc", /incompatible go-plugin core protocol version 2/],
    ["app version", "1|2|unix|/x|grpc", /plugin p: incompatible protocol version: plugin speaks 2, manent speaks 1/],
    ["non-numeric version", "1|x|unix|/x|grpc", /protocol version "x" is not a number/],
    ["network", "1|1|udp|/x|grpc", /unknown network "udp"/],
    ["tcp address without a port", "1|1|tcp|127.0.0.1|grpc", /tcp address "127.0.0.1" is not host:port/],
    ["tcp port out of range", "1|1|tcp|127.0.0.1:70000|grpc", /tcp address "127.0.0.1:70000" is not host:port/],
    ["net/rpc (no protocol field)", "1|1|unix|/x", /unsupported plugin protocol "netrpc"/],
    ["net/rpc", "1|1|tcp|127.0.0.1:1|netrpc", /unsupported plugin protocol "netrpc"/],
  ];
  for (const [what, line, re] of bad) {
    it(`refuses ${what} with an error naming the plugin`, () => {
      assert.throws(
        () => parseHandshake(line, "p"),
        (err: unknown) => err instanceof ManentError && re.test(err.message) && err.details.plugin === "p",
      );
    });
  }

  it("ignores a short sixth field, as go-plugin does for old plugins", () => {
    assert.equal(parseHandshake("1|1|tcp|127.0.0.1:1234|grpc|", "p").serverCert, undefined);
  });

  it("rejects a certificate field that is not base64", () => {
    assert.throws(() => decodeRawBase64("not*base64"));
  });
});

describe("hclog lines", () => {
  it("parses level, message and attributes", () => {
    const line = formatHclogLine("warn", "disk low", { host: "web1", free: 3 });
    const parsed = parseHclogLine(line.trimEnd());
    assert.deepEqual(parsed, {
      level: "warn",
      message: "disk low",
      attrs: { host: "web1", free: 3 },
      timestamp: JSON.parse(line)["@timestamp"],
    });
    assert.match(JSON.parse(line)["@timestamp"], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it("leaves non-hclog lines alone", () => {
    assert.equal(parseHclogLine("panic: boom"), undefined);
    assert.equal(parseHclogLine('{"msg":"pino style"}'), undefined);
    assert.equal(parseHclogLine("{not json"), undefined);
  });
});

describe("failure converter", () => {
  const roundTrip = (err: unknown): ManentError => {
    const st = toStatus(err);
    const se = Object.assign(new Error(st.details), { code: st.code!, details: st.details!, metadata: st.metadata! }) as ServiceError;
    return fromServiceError(se, "p", "Deploy");
  };

  it("keeps a permanent error permanent (ABORTED) with its details", () => {
    const e = roundTrip(new ManentError(Code.Aborted, "max_destroy exceeded", { details: { field: "max_destroy" } }));
    assert.equal(e.code, Code.Aborted);
    assert.equal(e.permanent, true);
    assert.deepEqual(e.details, { field: "max_destroy", plugin: "p" });
    assert.equal(toStatus(new ManentError(Code.Aborted, "x")).code, status.ABORTED);
  });

  it("carries per-target results of a failed deploy", () => {
    const result = {
      plugin: "p",
      targets: [
        { host: "a", status: "deployed" as const, duration_ms: 5 },
        { host: "b", status: "failed" as const, error: "boom" },
      ],
    };
    const e = roundTrip(new ResultError(new ManentError(Code.Unavailable, "boom"), result));
    assert.ok(e instanceof ResultError);
    assert.equal(e.code, Code.Unavailable);
    assert.deepEqual(e.result, result);
  });

  it("maps a bare UNIMPLEMENTED to an absent capability and keeps other codes", () => {
    const bare = (code: status) => Object.assign(new Error("x"), { code, details: "x", metadata: new Metadata() }) as ServiceError;
    const u = fromServiceError(bare(status.UNIMPLEMENTED), "p", "DryRun");
    assert.equal(u.code, Code.Unimplemented);
    assert.match(u.message, /plugin p does not implement DryRun/);
    assert.equal(fromServiceError(bare(status.RESOURCE_EXHAUSTED), "p", "Deploy").code, Code.ResourceExhausted);
  });
});

describe("external configuration", () => {
  it("splits external settings from the plugin configuration", () => {
    const { external, config } = parseExternalEntry("my", {
      external: {
        command: "./bin/p",
        sha256: "a".repeat(64),
        env: { KUBECONFIG: "/k" },
        start_timeout: "1m30s",
        supervision: { ping_interval: "2s", max_ping_failures: 3 },
      },
      namespace_prefix: "team-a-",
    });
    assert.deepEqual(external, {
      command: "./bin/p",
      args: [],
      sha256: "a".repeat(64),
      env: { KUBECONFIG: "/k" },
      startTimeoutMs: 90_000,
      supervision: { pingIntervalMs: 2_000, pingFailureBudget: 3 },
    });
    assert.deepEqual(config, { namespace_prefix: "team-a-" });
    assert.equal(parseExternalEntry("my", { external: { command: "p" } }).external.startTimeoutMs, 60_000);
    // What the manent.yml schema hands over: start_timeout already in milliseconds.
    assert.equal(
      parseExternalEntry("my", { external: { command: "p", args: [], env: {}, start_timeout: 45_000 } }).external.startTimeoutMs,
      45_000,
    );
  });

  it("names the field of a bad entry", () => {
    assert.throws(
      () => parseExternalEntry("my", { external: { command: "p", sha256: "xyz" } }),
      /plugins\.my\.external\.sha256: must be 64 lower-case hex/,
    );
    assert.throws(() => parseExternalEntry("my", { external: { command: "p", bogus: 1 } }), /plugins\.my\.external/);
    assert.throws(
      () => parseExternalEntry("my", { external: { command: "p", start_timeout: "soon" } }),
      /plugins\.my\.external\.start_timeout: "soon" is not a duration/,
    );
  });

  it("builds the environment from the allow-list, external.env and go-plugin's variables", () => {
    const env = pluginEnvironment(
      { PATH: "/bin", HOME: "/root", AWS_SECRET_ACCESS_KEY: "no", LANG: "C" },
      { KUBECONFIG: "/k", MANENT_PLUGIN: "spoof" },
      "PEM",
      "/d",
    );
    assert.deepEqual(env, {
      PATH: "/bin",
      HOME: "/root",
      LANG: "C",
      KUBECONFIG: "/k",
      MANENT_PLUGIN: "manent-deployer-plugin-6c1e0b",
      PLUGIN_PROTOCOL_VERSIONS: "1",
      PLUGIN_MIN_PORT: "10000",
      PLUGIN_MAX_PORT: "25000",
      PLUGIN_CLIENT_CERT: "PEM",
      PLUGIN_UNIX_SOCKET_DIR: "/d",
    });
  });
});

describe("stderr forwarding", () => {
  it("keeps hclog levels and attributes, guesses plain lines' levels like go-plugin", async () => {
    const seen: [string, string, Record<string, unknown>][] = [];
    const rec =
      (level: string) =>
      (msg: string, attrs: Record<string, unknown> = {}) =>
        void seen.push([level, msg, attrs]);
    const input = new PassThrough();
    const fwd = forwardStderr(input, "p", { debug: rec("debug"), info: rec("info"), warn: rec("warn"), error: rec("error") });
    const ended = new Promise((r) => input.on("end", r));
    input.end(
      [
        formatHclogLine("warn", "slow", { host: "a" }).trimEnd(),
        '{"@level":"trace","@message":"t","@timestamp":"2026-01-01T00:00:00.000000Z"}',
        "[WARN] old style",
        "plain",
        "panic: boom",
        "goroutine 1 [running]:",
      ].join("\n") + "\n",
    );
    await ended;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, [
      ["warn", "slow", { plugin: "p", "@timestamp": (seen[0]![2] as Record<string, string>)["@timestamp"], plugin_fields: { host: "a" } }],
      ["debug", "t", { plugin: "p", "@timestamp": "2026-01-01T00:00:00.000000Z" }],
      ["warn", "[WARN] old style", { plugin: "p", stream: "stderr" }],
      ["info", "plain", { plugin: "p", stream: "stderr" }],
      ["error", "panic: boom", { plugin: "p", stream: "stderr" }],
      ["error", "goroutine 1 [running]:", { plugin: "p", stream: "stderr" }],
    ]);
    assert.equal(fwd.tail().length, 6);
  });

  it("keeps a plugin's attributes apart: a plugin logging level, time, msg, service or deploy cannot forge manent's", async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString().split("\n").filter(Boolean));
        done();
      },
    });
    const logger = createLogger({ level: "debug", destination });
    // A real process writing hclog JSON on stderr, as a plugin does.
    const forged = {
      "@level": "info",
      "@message": "innocent",
      "@module": "forger",
      "@timestamp": "2026-01-01T00:00:00.000000Z",
      level: "error",
      time: 0,
      msg: "forged message",
      service: "not-manent",
      deploy: "00000000-0000-0000-0000-000000000000",
      plugin: "someone-else",
      pid: 1,
      hostname: "forged",
    };
    const child = spawn(process.execPath, ["-e", `process.stderr.write(${JSON.stringify(JSON.stringify(forged) + "\n")})`], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    forwardStderr(child.stderr, "forger-plugin", logger);
    await once(child, "close");
    await new Promise((r) => setImmediate(r));
    assert.equal(lines.length, 1, lines.join("\n"));
    const line = lines[0]!;
    assert.deepEqual(parseDocument(line, { uniqueKeys: true }).errors, [], `no duplicate key in ${line}`);
    const entry = JSON.parse(line) as Record<string, unknown>;
    assert.equal(entry.level, 30, "the hclog level, not the attribute");
    assert.equal(entry.msg, "innocent");
    assert.equal(entry.service, "manent-server");
    assert.equal(entry.plugin, "forger-plugin");
    assert.notEqual(entry.time, 0);
    assert.equal(entry.deploy, undefined);
    assert.equal(entry["@module"], "forger");
    assert.equal(entry["@timestamp"], "2026-01-01T00:00:00.000000Z");
    assert.deepEqual(entry.plugin_fields, {
      level: "error",
      time: 0,
      msg: "forged message",
      service: "not-manent",
      deploy: "00000000-0000-0000-0000-000000000000",
      plugin: "someone-else",
      pid: 1,
      hostname: "forged",
    });
  });
});
