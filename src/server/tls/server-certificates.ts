import { X509Certificate } from "node:crypto";
import { watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import type { ServerOptions } from "node:https";
import { dirname, resolve } from "node:path";
import { createSecureContext, type SecureContextOptions, type Server as TlsServer } from "node:tls";
import type { Logger } from "../../core/contract/index.js";
import type { LoadedConfig } from "../../core/config/index.js";
import { Code, ManentError } from "../../core/errors.js";

type Field = "cert_file" | "key_file" | "client_ca_file";

/** The PEM texts the server presents and verifies with. */
interface Material {
  cert: string;
  key: string;
  clientCa?: string;
}

/** Coalesces the events of one replacement (a cert and a key written one after the other). */
const settleMs = 100;

/**
 * The server's TLS certificate, key and client CA from manent.yml `tls`, reloaded when their files
 * change, without a restart: the directories are watched (a rename over the file, or a Kubernetes
 * secret's symlink swap, is seen as well as a write in place) and each change is applied to new
 * connections with `setSecureContext`. A new set that does not load (a key that does not match the
 * certificate, a half-written file) is logged and the previous one kept.
 */
export class ServerCertificates {
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private reloading: Promise<void> = Promise.resolve();

  private constructor(
    private readonly files: Partial<Record<Field, string>> & { cert_file: string; key_file: string },
    private readonly configFile: string,
    private material: Material,
    private readonly logger: Logger,
  ) {}

  /** Reads and checks the files; throws `invalid_argument` naming manent.yml's field and the reason. */
  static async load(config: LoadedConfig, logger: Logger): Promise<ServerCertificates> {
    const tls = config.tls!;
    const files = {
      cert_file: resolve(config.baseDir, tls.cert_file!),
      key_file: resolve(config.baseDir, tls.key_file!),
      ...(tls.client_ca_file !== undefined && { client_ca_file: resolve(config.baseDir, tls.client_ca_file) }),
    };
    const material = (await read(files, (field, reason) => {
      throw new ManentError(Code.InvalidArgument, `${config.file}: tls.${field}: ${reason}`, {
        details: { file: config.file, field: `tls.${field}` },
      });
    }))!;
    const certs = new ServerCertificates(files, config.file, material, logger);
    certs.logger.info("tls certificate loaded", certs.describe());
    return certs;
  }

  /** Options of `https.createServer`: TLS 1.2 or newer, and with a client CA, a client certificate required. */
  serverOptions(): ServerOptions {
    const mutual = this.material.clientCa !== undefined;
    return { ...contextOptions(this.material), requestCert: mutual, rejectUnauthorized: mutual };
  }

  /** Watches the files and applies each change to `server`'s new connections. */
  watch(server: TlsServer): void {
    for (const dir of new Set(Object.values(this.files).map((f) => dirname(f)))) {
      const watcher = watch(dir, { persistent: false }, () => this.changed(server));
      watcher.on("error", (err) =>
        this.logger.warn("tls: cannot watch the certificate files any more", { directory: dir, error: err.message }),
      );
      this.watchers.push(watcher);
    }
  }

  close(): void {
    clearTimeout(this.timer);
    for (const w of this.watchers) w.close();
  }

  private changed(server: TlsServer): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.reloading = this.reloading.then(() => this.reload(server));
    }, settleMs);
  }

  private async reload(server: TlsServer): Promise<void> {
    let refused: string | undefined;
    const material = await read(this.files, (field, reason) => {
      refused = `tls.${field}: ${reason}`;
      return undefined;
    });
    if (refused !== undefined || !material) {
      this.logger.warn("tls: the changed certificate files were refused; the previous certificate is still served", {
        file: this.configFile,
        error: refused,
      });
      return;
    }
    if (material.cert === this.material.cert && material.key === this.material.key && material.clientCa === this.material.clientCa) return;
    server.setSecureContext(contextOptions(material));
    this.material = material;
    this.logger.info("tls certificate reloaded", this.describe());
  }

  /** What the log says of the certificate: never the key. */
  private describe(): Record<string, unknown> {
    const cert = new X509Certificate(this.material.cert);
    return {
      cert_file: this.files.cert_file,
      subject: cert.subject.replace(/\n/g, ", "),
      serial: cert.serialNumber,
      not_after: new Date(cert.validTo).toISOString(),
      ...(this.files.client_ca_file !== undefined && { client_ca_file: this.files.client_ca_file }),
    };
  }
}

function contextOptions(m: Material): SecureContextOptions {
  return { cert: m.cert, key: m.key, ...(m.clientCa !== undefined && { ca: m.clientCa }), minVersion: "TLSv1.2" };
}

/** Reads the files and checks that they form a usable set; `refuse` says which field is wrong and why. */
async function read(
  files: Partial<Record<Field, string>>,
  refuse: (field: Field, reason: string) => undefined,
): Promise<Material | undefined> {
  const text: Partial<Record<Field, string>> = {};
  for (const [field, path] of Object.entries(files) as [Field, string][]) {
    try {
      text[field] = await readFile(path, "utf8");
    } catch (err) {
      return refuse(field, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const material: Material = {
    cert: text.cert_file!,
    key: text.key_file!,
    ...(text.client_ca_file !== undefined && { clientCa: text.client_ca_file }),
  };
  const check = (field: Field, what: () => unknown): boolean => {
    try {
      what();
      return true;
    } catch (err) {
      refuse(field, `${files[field]}: ${(err as Error).message}`);
      return false;
    }
  };
  if (!check("cert_file", () => new X509Certificate(material.cert))) return undefined;
  if (material.clientCa !== undefined && !check("client_ca_file", () => new X509Certificate(material.clientCa!))) return undefined;
  // OpenSSL's own check: the key parses and matches the certificate (its message never holds the key).
  if (!check("key_file", () => createSecureContext(contextOptions(material)))) return undefined;
  return material;
}
