import { chmod, mkdir } from "node:fs/promises";

/**
 * The workdir lets others through (mode 0711: the embedded Postgres runs as another user and
 * reaches its data below it) but not list it; artifacts and uploads below it are the server's
 * user's alone (0700 directories, 0600 files).
 */
export async function prepareWorkdir(workdir: string): Promise<void> {
  await mkdir(workdir, { recursive: true, mode: 0o711 });
  await chmod(workdir, 0o711);
  await privateDir(`${workdir}/artifacts`);
  await privateDir(`${workdir}/uploads`);
}

/** Creates a directory private to the server's user (0700), tightening one that exists. */
export async function privateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}
