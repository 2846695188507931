import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import { Agent, fetch as undiciFetch } from "undici";
import { freePort, ManagedProcess, toolsBin } from "./kube/processes.js";
import type { TestCa } from "./test-ca.js";

/** A binary scripts/ci/oci-registry.sh builds, or a clear error. */
export function ociTool(name: "registry" | "cosign"): string {
  const path = `${toolsBin}/${name}`;
  if (!existsSync(path)) throw new Error(`${path} is missing: run scripts/ci/oci-registry.sh (scripts/test-setup.sh does)`);
  return path;
}

/**
 * distribution's registry on a loopback port, over TLS with a certificate of the test's CA and
 * HTTP Basic sign-in from an htpasswd file (bcrypt), as a private registry is run.
 */
export class TestRegistry {
  private readonly dispatcher: Agent;

  private constructor(
    private readonly process: ManagedProcess,
    readonly host: string,
    readonly user: string,
    readonly password: string,
    ca: string,
  ) {
    this.dispatcher = new Agent({ connect: { ca } });
  }

  static async start(dir: string, ca: TestCa, user: string, password: string): Promise<TestRegistry> {
    await mkdir(join(dir, "storage"), { recursive: true });
    const cert = await ca.server();
    await writeFile(join(dir, "tls.crt"), cert.certPem);
    await writeFile(join(dir, "tls.key"), cert.keyPem, { mode: 0o600 });
    await writeFile(join(dir, "htpasswd"), `${user}:${bcrypt.hashSync(password, 10)}\n`);
    const port = await freePort();
    const config = [
      "version: 0.1",
      "log: {level: info}",
      `storage: {filesystem: {rootdirectory: ${join(dir, "storage")}}}`,
      `http: {addr: "127.0.0.1:${port}", tls: {certificate: ${join(dir, "tls.crt")}, key: ${join(dir, "tls.key")}}}`,
      `auth: {htpasswd: {realm: test-registry, path: ${join(dir, "htpasswd")}}}`,
      "",
    ].join("\n");
    await writeFile(join(dir, "config.yml"), config);
    const proc = ManagedProcess.start("registry", ociTool("registry"), ["serve", join(dir, "config.yml")], join(dir, "registry.log"));
    const registry = new TestRegistry(proc, `127.0.0.1:${port}`, user, password, ca.certPem);
    await registry.ready();
    return registry;
  }

  /** Polls /v2/ until the registry answers (401: it wants sign-in); fails at once if it exits. */
  private async ready(): Promise<void> {
    let delay = 20;
    for (let i = 0; i < 200; i++) {
      if (!this.process.running) throw new Error(`registry exited: ${this.process.tail()}`);
      const res = await undiciFetch(`https://${this.host}/v2/`, { dispatcher: this.dispatcher }).catch(() => undefined);
      if (res) {
        await res.body?.cancel();
        if (res.status === 401 || res.status === 200) return;
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 250);
    }
    throw new Error(`registry did not start: ${this.process.tail()}`);
  }

  async stop(): Promise<void> {
    await this.process.stop();
    await this.dispatcher.close();
  }

  private auth(): Record<string, string> {
    return { authorization: `Basic ${Buffer.from(`${this.user}:${this.password}`).toString("base64")}` };
  }

  /** Uploads a blob (monolithic upload: POST, then PUT with the digest). */
  async pushBlob(repo: string, data: Buffer): Promise<string> {
    const digest = `sha256:${createHash("sha256").update(data).digest("hex")}`;
    const start = await undiciFetch(`https://${this.host}/v2/${repo}/blobs/uploads/`, {
      method: "POST",
      headers: this.auth(),
      dispatcher: this.dispatcher,
    });
    await start.body?.cancel();
    if (start.status !== 202) throw new Error(`blob upload start: ${start.status}`);
    const location = new URL(start.headers.get("location")!, `https://${this.host}`);
    location.searchParams.set("digest", digest);
    const put = await undiciFetch(location, {
      method: "PUT",
      headers: { ...this.auth(), "content-type": "application/octet-stream" },
      body: data,
      dispatcher: this.dispatcher,
    });
    await put.body?.cancel();
    if (put.status !== 201) throw new Error(`blob upload: ${put.status}`);
    return digest;
  }

  /** Pushes a minimal OCI image (a config and one layer) under `tag`; returns its manifest digest. */
  async pushImage(repo: string, tag: string, content: string): Promise<string> {
    const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [] } }));
    const layer = Buffer.from(content);
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: await this.pushBlob(repo, config), size: config.length },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: await this.pushBlob(repo, layer), size: layer.length }],
      }),
    );
    return this.pushManifest(repo, tag, manifest);
  }

  async manifest(repo: string, tag: string): Promise<Buffer> {
    const res = await undiciFetch(`https://${this.host}/v2/${repo}/manifests/${tag}`, {
      headers: { ...this.auth(), accept: "application/vnd.oci.image.manifest.v1+json" },
      dispatcher: this.dispatcher,
    });
    if (res.status !== 200) throw new Error(`manifest get: ${res.status}`);
    return Buffer.from(await res.arrayBuffer());
  }

  async pushManifest(repo: string, tag: string, manifest: Buffer): Promise<string> {
    const res = await undiciFetch(`https://${this.host}/v2/${repo}/manifests/${tag}`, {
      method: "PUT",
      headers: { ...this.auth(), "content-type": "application/vnd.oci.image.manifest.v1+json" },
      body: manifest,
      dispatcher: this.dispatcher,
    });
    await res.body?.cancel();
    if (res.status !== 201) throw new Error(`manifest push: ${res.status}`);
    return `sha256:${createHash("sha256").update(manifest).digest("hex")}`;
  }
}
