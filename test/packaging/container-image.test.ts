import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { repoRoot } from "../support/server-process.js";

const run = promisify(execFile);

interface ImageConfig {
  User: string;
  Env: string[];
  Entrypoint: string[];
  Cmd: string[];
  WorkingDir: string;
}

/**
 * The image of packaging/container, built with buildah from Debian packages (cached: an unchanged
 * checkout reuses it). No container can be started on these machines, so its filesystem is
 * mounted (buildah mount) and its entrypoint run there with chroot, as the image's user, with the
 * image's environment and working directory.
 */
describe("the container image (packaging/container)", () => {
  let image: string;
  let container: string;
  let root: string;
  let config: ImageConfig;

  before(async () => {
    const built = await run("bash", [join(repoRoot, "packaging/container/build.sh")], { maxBuffer: 16 << 20 });
    image = built.stdout.trim().split("\n").at(-1)!;
    const inspected = JSON.parse((await run("buildah", ["inspect", "--type", "image", image])).stdout) as {
      OCIv1: { config: ImageConfig };
    };
    config = inspected.OCIv1.config;
    container = (await run("buildah", ["from", "--pull-never", image])).stdout.trim();
    root = (await run("buildah", ["mount", container])).stdout.trim();
  });
  after(async () => {
    if (container) await run("buildah", ["rm", container]);
  });

  /** Runs a command in the image's filesystem as its user, with its environment, in a private mount namespace. */
  function inImage(command: string[], extraEnv: string[] = []): ReturnType<typeof spawn> {
    const [uid, gid] = config.User.split(":");
    // The image's environment only (env -i), as a container would have; the host's PATH finds chroot.
    const imageEnv = [...config.Env, `HOME=${config.WorkingDir}`, ...extraEnv];
    const script =
      'mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" && root=$1 && shift && ' +
      `exec chroot --userspec=${uid}:${gid} "$root" /usr/bin/env -i ${imageEnv.map((e) => `'${e}'`).join(" ")} ` +
      `/bin/sh -c 'cd "$0" && exec "$@"' "$@"`;
    return spawn("unshare", ["--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", root, config.WorkingDir, ...command], {
      stdio: ["ignore", "pipe", "pipe"],
    });
  }

  async function output(command: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = inImage(command);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    return { code, stdout, stderr };
  }

  it("runs as a non-root user, manent-server as its entrypoint with the shipped manent.yml", () => {
    assert.equal(config.User, "10001:10001");
    assert.deepEqual(config.Entrypoint, ["/opt/manent/bin/manent-server.js"]);
    assert.deepEqual(config.Cmd, ["-c", "/etc/manent/manent.yml", "serve"]);
    assert.equal(config.WorkingDir, "/var/lib/manent");
  });

  it("has Debian's Node.js >= 20.19 and answers manent-server --help", async () => {
    const node = await output(["node", "--version"]);
    assert.equal(node.code, 0, node.stderr);
    const [major, minor] = node.stdout.trim().slice(1).split(".").map(Number);
    assert.ok(major! > 20 || (major === 20 && minor! >= 19), node.stdout);
    const help = await output([...config.Entrypoint, "--help"]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /Usage: manent-server/);
    assert.match(help.stdout, /serve \[options\]\s+run the deploy engine/);
  });

  it("starts a server with its embedded Postgres as the image's user, answers /healthz and the API, stops on SIGTERM", async () => {
    const token = randomBytes(16).toString("hex");
    // The shipped manent.yml as is (listen 0.0.0.0:8080, which a token must guard); only the port is
    // free here, as a container's own network namespace would have it.
    const child = inImage([...config.Entrypoint, ...config.Cmd, "--listen", "0.0.0.0:0"], [`MANENT_ADMIN_TOKEN=${token}`]);
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = once(child, "exit");
    try {
      let url = await new Promise<string>((resolve, reject) => {
        // Its JSON log says where it listens.
        child.stderr!.on("data", () => {
          const m = /"msg":"manent-server listening on (http:\/\/[^\s"]+)"/.exec(stderr);
          if (m) resolve(m[1]!);
        });
        void exited.then(([code]) => reject(new Error(`the server exited (${String(code)}) before listening:\n${stderr.slice(-3000)}`)));
      });
      const port = new URL(url).port;
      url = `http://127.0.0.1:${port}`;
      const health = await fetch(`${url}/healthz`);
      assert.equal(health.status, 200, await health.text());
      assert.equal((await fetch(`${url}/api/v1/deploys`)).status, 401);
      const history = await fetch(`${url}/api/v1/deploys`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(history.status, 200, await history.text());
      // The embedded Postgres's data is in the state volume, owned by the image's user.
      const data = await stat(join(root, "var/lib/manent/postgres/data/PG_VERSION"));
      assert.equal(`${data.uid}:${data.gid}`, config.User);
      assert.match(stderr, /embedded Postgres started/);
    } finally {
      child.kill("SIGTERM");
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0, stderr.slice(-3000));
    }
  });
});
