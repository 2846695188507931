import { z } from "zod";
import { parseFieldPath } from "../contract/field-path.js";

/** A Kubernetes kind (`Deployment`), or `*`. */
const kindName = /^(\*|[A-Z][A-Za-z0-9]*)$/;

const fieldPath = z.string().superRefine((path, ctx) => {
  try {
    parseFieldPath(path);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: (err as Error).message });
  }
});

/**
 * One entry of `drift.ignore`, as Argo CD's `ignoreDifferences` but simpler: objects by kind (and
 * optionally group, name, namespace), and the fields drift neither reports nor a deploy changes on
 * a live object: by path, or every field a field manager owns.
 */
export const driftIgnoreSchema = z
  .strictObject({
    kind: z
      .string()
      .regex(kindName, { message: "must be a Kubernetes kind (Deployment, ConfigMap, ...) or * for every kind" })
      .describe("The objects' kind (`Deployment`), or `*` for every kind"),
    group: z
      .string()
      .regex(/^$|^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/, { message: 'must be an API group (apps, networking.k8s.io; "" for the core group)' })
      .optional()
      .describe('The API group (`apps`, `""` for the core group); absent: any'),
    name: z.string().min(1).optional().describe("Only the object of this name; absent: every object of the kind"),
    namespace: z.string().min(1).optional().describe("Only objects in this namespace; absent: any"),
    fields: z
      .array(fieldPath)
      .default([])
      .meta({
        description:
          'Field paths, as drift shows them: `spec.replicas`, `spec.template.spec.containers[0].image`, `metadata.annotations["example.com/owner"]`; `[*]` is any index or key. A path covers everything under it',
        examples: [["spec.replicas"]],
      }),
    managers: z
      .array(z.string().min(1))
      .default([])
      .meta({
        description:
          "Field managers (as `metadata.managedFields` names them, `kubectl get -o yaml --show-managed-fields`): every field one of them owns on the live object",
        examples: [["kube-controller-manager"]],
      }),
  })
  .refine((r) => r.fields.length > 0 || r.managers.length > 0, {
    message: "names no fields and no managers: list fields, managers or both",
  });

export type DriftIgnore = z.output<typeof driftIgnoreSchema>;
