import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ReleaseTimeline, releaseView } from "../../src/cli/release-view.js";
import type { ReleaseRecord, StageState } from "../../src/core/release/release-store.js";

const stage = (index: number, environment: string, status: StageState["status"], extra: Partial<StageState> = {}): StageState => ({
  index,
  environments: [environment],
  status,
  deploys: [],
  promoted_by: null,
  promoted_at: null,
  approvals: [],
  soak_since: null,
  soak_until: null,
  measurements: [],
  started_at: null,
  finished_at: null,
  message: null,
  ...extra,
});

/** A retry of release "old-1" that starts at staging: dev carried over as done by "old-1". */
const retry: ReleaseRecord = {
  id: "new-2",
  tenant: "untenanted",
  application: "hello",
  artifact: "hello",
  version: "1.1.0",
  sha256: "ab".repeat(32),
  source: "dist/hello.tar.gz",
  status: "running",
  pipeline: { stages: [] },
  pipeline_file: "envconfig/untenanted/hello/pipeline.yml",
  environments: ["dev", "staging"],
  current_stage: 2,
  stages: [
    stage(1, "dev", "succeeded", { done_by: "old-1", deploys: [{ environment: "dev", deploy_id: "d-1", status: "succeeded" }] }),
    stage(2, "staging", "deploying", { deploys: [{ environment: "staging", deploy_id: "d-2", status: "running" }] }),
  ],
  waiting: null,
  error: null,
  submitted_by: "alice",
  submitted_by_id: "token:alice",
  cancel_requested_by: null,
  retry_of: "old-1",
  retried_by: [],
  created_at: "2026-12-02T10:00:00.000Z",
  finished_at: null,
};

describe("a release retry in the CLI's views", () => {
  it("names the release it retries, and the one that did a carried-over stage", () => {
    const lines = releaseView(retry);
    assert.ok(lines.includes("  Retry of: release old-1"), lines.join("\n"));
    assert.ok(lines.includes("  1. dev      succeeded  done by release old-1; deploy d-1 succeeded"), lines.join("\n"));
    assert.ok(lines.includes("  2. staging  deploying  deploy d-2 running"), lines.join("\n"));
    assert.ok(!lines.some((l) => l.includes("Retried")));
    assert.ok(releaseView({ ...retry, retry_of: null, retried_by: ["new-3"] }).includes("  Retried:  by release new-3"));
  });

  it("prints each once in a pipe", () => {
    const out: string[] = [];
    const timeline = new ReleaseTimeline((l) => out.push(l));
    timeline.update(retry);
    timeline.update(retry);
    assert.deepEqual(out, [
      "release new-2: hello 1.1.0 (hello)",
      "retry of release old-1",
      `sha256 ${"ab".repeat(32)}`,
      "1. dev: succeeded (done by release old-1)",
      "1. dev: deploy d-1 to dev succeeded",
      "2. staging: deploying",
      "2. staging: deploy d-2 to staging running",
    ]);
  });
});
