import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { access, chmod, copyFile, open, rm, stat } from "node:fs/promises";
import { Code, ManentError } from "../../core/errors.js";

/**
 * Activation checks of an external plugin's binary: it exists, is a regular executable file and,
 * when a sha256 is configured, has that hash. Run at activation and again before every start.
 */
export async function checkBinary(plugin: string, command: string, sha256: string | undefined): Promise<void> {
  const details = { plugin, command };
  const st = await stat(command).catch((err: NodeJS.ErrnoException) => {
    throw new ManentError(Code.FailedPrecondition, `plugin ${plugin}: command ${command} not found (${err.code})`, { details });
  });
  if (!st.isFile())
    throw new ManentError(Code.FailedPrecondition, `plugin ${plugin}: command ${command} is not a regular file`, { details });
  await access(command, constants.X_OK).catch(() => {
    throw new ManentError(Code.FailedPrecondition, `plugin ${plugin}: command ${command} is not executable`, { details });
  });
  if (sha256 !== undefined) {
    const actual = await hashFile(command);
    if (actual !== sha256) throw mismatch(plugin, command, sha256, actual);
  }
}

function mismatch(plugin: string, command: string, want: string, got: string): ManentError {
  return new ManentError(Code.FailedPrecondition, `plugin ${plugin}: sha256 of ${command} is ${got}, the configuration wants ${want}`, {
    details: { plugin, command },
  });
}

async function hashFile(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest("hex");
}

/** A private copy of the plugin binary to exec; `dir` holds the process's sockets (removed by `remove`). */
export interface StagedBinary {
  dir: string;
  path: string;
  remove(): Promise<void>;
}

/** dev, ino, size, mtime and ctime of a file: a copy made from it stays valid while they do. */
export async function sourceIdentity(file: string): Promise<string> {
  const st = await stat(file, { bigint: true });
  return [st.dev, st.ino, st.size, st.mtimeNs, st.ctimeNs].join(":");
}

/**
 * Copies `command` to `dest` (created, mode 0500: nobody else can write the copy and its directory
 * is private), hashing the bytes as they are written when `sha256` is wanted, in one pass: the
 * bytes checked are the bytes written, and so the ones that will run. Returns the identity of the
 * source as it was opened (a copy made while it changed is then simply made again next time).
 */
export async function copyVerified(
  plugin: string,
  command: string,
  dest: string,
  sha256: string | undefined,
): Promise<{ source: string; sha256: string | undefined }> {
  await checkBinary(plugin, command, undefined);
  const before = await sourceIdentity(command);
  // A source that changed while it was copied is not remembered as the one copied.
  const source = async () => ((await sourceIdentity(command)) === before ? before : "changed while copied");
  try {
    if (sha256 === undefined) {
      // copy_file_range/reflink where the kernel can: a Go plugin is tens of MB.
      await copyFile(command, dest, constants.COPYFILE_EXCL);
      await chmod(dest, 0o500);
      return { source: await source(), sha256: undefined };
    }
    const h = createHash("sha256");
    const input = await open(command, "r");
    const output = await open(dest, "wx", 0o700);
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (;;) {
        const { bytesRead } = await input.read(buf, 0, buf.length, null);
        if (bytesRead === 0) break;
        const chunk = buf.subarray(0, bytesRead);
        h.update(chunk);
        await output.write(chunk);
      }
    } finally {
      await Promise.all([input.close(), output.close()]);
    }
    await chmod(dest, 0o500);
    const actual = h.digest("hex");
    if (actual !== sha256) throw mismatch(plugin, command, sha256, actual);
    return { source: await source(), sha256: actual };
  } catch (err) {
    await rm(dest, { force: true });
    throw err;
  }
}
