import type { ApprovalRecord, WaitingState } from "../../../src/core/rollout/rollout-state.js";
import { Time } from "./common.js";

/**
 * Who approved the rollout's approvals (name, when, at which step), and at the approval it waits
 * at, who is still awaited: how many more, from which groups, whether the submitter may approve.
 */
export function Approvals({ approvals, waiting }: { approvals: ApprovalRecord[] | undefined; waiting: WaitingState | null }) {
  const req = waiting?.kind === "approval" ? waiting.approvers : undefined;
  const given = (approvals ?? []).filter((a) => a.step === waiting?.step);
  if (!approvals?.length && !req?.explicit) return null;
  const from = req?.from_groups.length ? ` from ${req.from_groups.join(" or ")}` : "";
  return (
    <div class="approvals" aria-label="approvals">
      <h3>Approvals</h3>
      {req?.explicit && waiting && (
        <p class="awaited" role="status">
          {given.length} of {req.count} approvals{from} at {waiting.step}: {req.count - given.length} more awaited
          {req.allow_submitter ? "" : "; the submitter may not approve"}
        </p>
      )}
      {approvals && approvals.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Step</th>
              <th scope="col">Approved by</th>
              <th scope="col">With</th>
            </tr>
          </thead>
          <tbody>
            {approvals.map((a) => (
              <tr>
                <td>
                  <Time iso={a.at} />
                </td>
                <td>{a.step}</td>
                <td title={a.by_id}>{a.by}</td>
                <td>{a.command}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
