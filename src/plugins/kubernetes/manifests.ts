import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { Code, ManentError } from "../../core/errors.js";
import type { KubeObject } from "./objects.js";

const objectSchema = z.looseObject({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  metadata: z.looseObject({
    name: z.string().min(1),
    namespace: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
  }),
});

/** Parses multi-document YAML into objects; empty documents are skipped and `List`s unwrapped. */
export function parseManifests(text: string, file: string): KubeObject[] {
  const out: KubeObject[] = [];
  const docs = parseAllDocuments(text);
  for (const [i, doc] of docs.entries()) {
    if (doc.errors.length > 0) {
      throw new ManentError(Code.InvalidArgument, `kubernetes: ${file}: document ${i + 1}: invalid YAML: ${doc.errors[0]!.message}`);
    }
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    const items =
      typeof value === "object" && (value as { kind?: unknown }).kind === "List" && Array.isArray((value as { items?: unknown }).items)
        ? (value as { items: unknown[] }).items
        : [value];
    for (const item of items) {
      const parsed = objectSchema.safeParse(item);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new ManentError(
          Code.InvalidArgument,
          `kubernetes: ${file}: document ${i + 1}: ${issue.path.join(".") || "object"}: ${issue.message}`,
        );
      }
      out.push(parsed.data as KubeObject);
    }
  }
  return out;
}
