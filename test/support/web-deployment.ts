/** A Deployment `web` (selector app: web) running these containers, as one YAML manifest with a trailing newline. */
export function webDeployment(containers: { name: string; image: string }[]): string {
  return [
    "apiVersion: apps/v1",
    "kind: Deployment",
    "metadata: {name: web}",
    "spec:",
    "  selector: {matchLabels: {app: web}}",
    "  template:",
    "    metadata: {labels: {app: web}}",
    "    spec:",
    `      containers: [${containers.map((c) => `{name: ${c.name}, image: "${c.image}"}`).join(", ")}]`,
    "",
  ].join("\n");
}
