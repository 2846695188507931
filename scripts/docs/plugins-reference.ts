import { paramsSchema as kubernetesParams } from "../../src/plugins/kubernetes/params.js";
import { configSchema as noopConfig, paramsSchema as noopParams } from "../../src/plugins/noop/noop-plugin.js";
import { paramsSchema as remoteCopyParams } from "../../src/plugins/remote-copy/params.js";
import { schemaTable, undocumentedKeys } from "./schema-reference.js";

interface BuiltIn {
  name: string;
  from: string;
  about: string;
  /** What `plugins.<name>` in manent.yml takes: a schema, or a sentence when it is not a fixed set of keys. */
  config: Parameters<typeof schemaTable>[0] | string;
  params: Parameters<typeof schemaTable>[0];
  /** Param families read besides the fixed keys (`var.NAME`), as Markdown list items. */
  families?: string[];
  /** Whether a param not in the table is refused (a misspelling caught) or ignored. */
  unknownParams: "refused" | "ignored";
}

const builtIns: BuiltIn[] = [
  {
    name: "remote-copy",
    from: "src/plugins/remote-copy/params.ts",
    about:
      "Copies a release to hosts over SSH (or the worker's own filesystem), switches a `current` symlink and runs an activation command; with slots and HAProxy, percentage rollouts. Tutorials: [remote-copy over SSH](../tutorials/remote-copy-ssh.md), [canary analysis](../tutorials/canary-analysis.md); rollouts: [remote-copy rollouts](../plugins/remote-copy-rollouts.md).",
    config:
      "Any param below, as a default for every envconfig that uses the plugin (strings, numbers or booleans; an envconfig's own param wins), e.g. `remote-copy: {keep_releases: 3}`. Pinned settings such as `haproxy_socket` cannot be changed by an envconfig once set here.",
    params: remoteCopyParams,
    unknownParams: "refused",
  },
  {
    name: "kubernetes",
    from: "src/plugins/kubernetes/params.ts",
    about:
      "Applies manifests or a Helm chart with server-side apply to a namespace of each target cluster (`https://host:port`), waits for availability, keeps a release history for rollback; with an HTTPRoute, percentage rollouts. Tutorial: [kubernetes](../tutorials/kubernetes.md); rollouts: [kubernetes rollouts](../plugins/kubernetes-rollouts.md).",
    config: "Nothing (`kubernetes: {}`): every setting is an envconfig param.",
    params: kubernetesParams,
    families: [
      "`var.NAME`: substituted as `${NAME}` in manifests (names are letters, digits and `_`).",
      "`helm_value.KEY`: charts only, passed as `--set-string KEY=VALUE`.",
      "Target labels `token_secret` and `ca_secret` name one cluster's own secrets, overriding the params'.",
    ],
    unknownParams: "refused",
  },
  {
    name: "noop",
    from: "src/plugins/noop/noop-plugin.ts",
    about:
      "Changes nothing outside its own state: for trying a pipeline, measuring the orchestrator and drilling failures. It implements every optional interface.",
    config: noopConfig,
    params: noopParams,
    unknownParams: "ignored",
  },
];

/** The built-in plugins' manent.yml configuration and envconfig params, from their schemas. */
export function pluginsReference(): { markdown: string; undocumented: string[] } {
  const parts: string[] = [];
  const undocumented: string[] = [];
  for (const p of builtIns) {
    parts.push(`## ${p.name}`, "", p.about, "", `### manent.yml: \`plugins.${p.name}\``, "");
    if (typeof p.config === "string") parts.push(p.config, "");
    else {
      parts.push(schemaTable(p.config), "");
      undocumented.push(...undocumentedKeys(p.config).map((k) => `${p.from}: plugins.${p.name}.${k}`));
    }
    parts.push(
      "### Envconfig `params`",
      "",
      `Params are strings in the envconfig (\`"3"\`, \`"true"\`, \`"90s"\`); an unknown param is ${p.unknownParams}.`,
      "",
    );
    parts.push(schemaTable(p.params), "");
    if (p.families) parts.push(...p.families.map((f) => `- ${f}`), "");
    undocumented.push(...undocumentedKeys(p.params).map((k) => `${p.from}: params.${k}`));
  }
  return { markdown: parts.join("\n"), undocumented };
}
