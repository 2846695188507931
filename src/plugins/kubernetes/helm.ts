import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Code, ManentError } from "../../core/errors.js";

export interface HelmRenderInput {
  chartPath: string;
  chartName: string;
  /** The chart's files, to read `helm_values_files` from inside it. */
  chartFiles: Map<string, Buffer>;
  release: string;
  namespace: string;
  kubeVersion: string;
  apiVersions: string[];
  valuesFiles: string[];
  inlineValues?: string;
  set: Record<string, string>;
  signal?: AbortSignal;
}

/** The helm binary: `MANENT_HELM` when set, else `helm` from PATH. */
export function helmBinary(): string {
  return process.env.MANENT_HELM || "helm";
}

/**
 * Renders a chart with `helm template`, as the target cluster would see it: its version and the
 * API versions its discovery lists, so `.Capabilities` checks pick the right branches. Helm keeps
 * no state in the cluster; manent applies the output like any manifest.
 */
export async function renderChart(input: HelmRenderInput): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "manent-helm-"));
  try {
    const args = [
      "template",
      input.release,
      input.chartPath,
      "--namespace",
      input.namespace,
      "--kube-version",
      input.kubeVersion,
      "--include-crds",
    ];
    if (input.apiVersions.length > 0) args.push("--api-versions", input.apiVersions.join(","));
    for (const [i, name] of input.valuesFiles.entries()) {
      // Values files are named relative to the chart, never the worker's disk.
      if (name.split("/").includes("..") || name.startsWith("/")) {
        throw new ManentError(Code.InvalidArgument, `kubernetes: helm_values_files: ${name}: must be a path inside the chart`);
      }
      const data = input.chartFiles.get(`${input.chartName}/${name}`);
      if (!data) {
        throw new ManentError(Code.InvalidArgument, `kubernetes: helm_values_files: ${name}: no such file in chart ${input.chartName}`);
      }
      const file = join(dir, `values-${i}`, name);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, data);
      args.push("--values", file);
    }
    if (input.inlineValues) {
      const file = join(dir, "inline-values.yaml");
      await writeFile(file, input.inlineValues);
      args.push("--values", file);
    }
    for (const [k, v] of Object.entries(input.set)) args.push("--set-string", `${k}=${v}`);
    return await run(helmBinary(), args, input.signal);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function run(bin: string, args: string[], signal?: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], signal, env: { ...process.env, HELM_NAMESPACE: "" } });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "ENOENT") {
        reject(
          new ManentError(
            Code.FailedPrecondition,
            `kubernetes: the artifact is a Helm chart and the helm binary was not found (${bin}); install helm on PATH or set MANENT_HELM to its path`,
          ),
        );
      } else reject(ManentError.from(e));
    });
    child.on("close", (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString("utf8"));
      else {
        const msg = Buffer.concat(err).toString("utf8").trim().split("\n").slice(-5).join(" | ");
        reject(new ManentError(Code.InvalidArgument, `kubernetes: helm template failed (exit ${code}): ${msg}`));
      }
    });
  });
}

/** Helm hook objects (`helm.sh/hook`): Helm runs them around install; manent skips them by default. */
export function isHelmHook(obj: { metadata: { annotations?: Record<string, string> } }): boolean {
  return obj.metadata.annotations?.["helm.sh/hook"] !== undefined;
}
