import { accessSync, constants } from "node:fs";
import { delimiter, join, resolve } from "node:path";

/** The helm binary tests use: `.tools/bin/helm` (scripts/ci/kubernetes.sh builds it), else PATH. */
export function findHelm(): string | undefined {
  const candidates = [
    resolve(import.meta.dirname, "../../../.tools/bin/helm"),
    ...(process.env.PATH ?? "").split(delimiter).map((d) => join(d, "helm")),
  ];
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // not here
    }
  }
  return undefined;
}
