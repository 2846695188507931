import { z } from "zod";
import { targetId, type Target } from "../../core/contract/index.js";
import { Code, ManentError } from "../../core/errors.js";

/** A host's two slots, in the order given: the first is live on a host that has never had one. */
export interface Slots {
  names: [string, string];
  ports: Record<string, number>;
}

const slotName = /^[a-z][a-z0-9-]{0,30}$/;

/** Parses `blue=8081,green=8082`; the reason it is wrong otherwise. */
export function parseSlotPorts(value: string): Slots | string {
  const pairs = value
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((p) => p.split("="));
  if (pairs.length !== 2) return "must name exactly two slots, as blue=8081,green=8082";
  const ports: Record<string, number> = {};
  for (const [name, port] of pairs) {
    if (!name || !slotName.test(name)) return `slot name "${name ?? ""}" must be lower-case letters, digits and '-'`;
    if (!port || !/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)
      return `slot ${name}: port "${port ?? ""}" must be 1-65535`;
    if (name in ports) return `slot ${name} is named twice`;
    ports[name] = Number(port);
  }
  const [a, b] = pairs as [[string, string], [string, string]];
  if (ports[a[0]] === ports[b[0]]) return "the two slots must serve different ports";
  return { names: [a[0], b[0]], ports };
}

export const slotPortsParam = z.string().transform((v, ctx) => {
  const slots = parseSlotPorts(v);
  if (typeof slots === "string") {
    ctx.addIssue({ code: "custom", message: slots });
    return z.NEVER;
  }
  return slots;
});

/** The target's slots: its `slot_ports` label, else the param; undefined when slots are off. */
export function slotsFor(paramSlots: Slots | undefined, target: Target): Slots | undefined {
  const label = target.labels["slot_ports"];
  if (label === undefined) return paramSlots;
  const slots = parseSlotPorts(label);
  if (typeof slots === "string") {
    throw new ManentError(Code.InvalidArgument, `remote-copy: target ${targetId(target)}: label slot_ports: ${slots}`, {
      details: { plugin: "remote-copy", host: target.host, label: "slot_ports" },
    });
  }
  if (paramSlots && slots.names.join() !== paramSlots.names.join()) {
    throw new ManentError(
      Code.InvalidArgument,
      `remote-copy: target ${targetId(target)}: label slot_ports names slots ${slots.names.join(", ")} but param slot_ports names ${paramSlots.names.join(", ")}`,
      { details: { plugin: "remote-copy", host: target.host, label: "slot_ports" } },
    );
  }
  return slots;
}

export function otherSlot(slots: Slots, slot: string): string {
  return slots.names[0] === slot ? slots.names[1] : slots.names[0];
}
