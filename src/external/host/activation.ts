import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { access, chmod, copyFile, mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
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
  if (!st.isFile()) throw new ManentError(Code.FailedPrecondition, `plugin ${plugin}: command ${command} is not a regular file`, { details });
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

/** A private copy of the plugin binary; `dir` also holds the host's sockets for that process. */
export interface StagedBinary {
  dir: string;
  path: string;
  remove(): Promise<void>;
}

/**
 * Copies the binary into a fresh private directory (mode 0700, owned by manent's user), then
 * checks the hash of the copy, and returns the copy to exec. What runs is exactly what was
 * checked: nobody else can write the private copy, and replacing the configured file after the
 * check cannot change it.
 */
export async function stageBinary(plugin: string, command: string, sha256: string | undefined): Promise<StagedBinary> {
  await checkBinary(plugin, command, undefined);
  const dir = await mkdtemp(path.join(os.tmpdir(), "manent-plugin-"));
  await chmod(dir, 0o700);
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    const dest = path.join(dir, "plugin");
    // copy_file_range/reflink where the kernel can: a Go plugin is tens of MB.
    await copyFile(command, dest, constants.COPYFILE_EXCL);
    await chmod(dest, 0o500);
    if (sha256 !== undefined) {
      const actual = await hashFile(dest);
      if (actual !== sha256) throw mismatch(plugin, command, sha256, actual);
    }
    return { dir, path: dest, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}
