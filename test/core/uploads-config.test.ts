import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatBytes, uploadQuota } from "../../src/core/config/index.js";
import { loadManentYml } from "../support/load-manent-yml.js";

/** manent.yml's uploads section and artifacts.cache_size: defaults, quotas per tenant, errors naming file and field. */
describe("uploads configuration", () => {
  const load = loadManentYml;

  it("has no quota, keeps the last 3 releases and sweeps hourly by default; the cache is 10 GiB", async () => {
    const config = await load({});
    assert.deepEqual(config.uploads, { tenant_quotas: {}, retention: { keep_releases: 3, min_age: 3_600_000, sweep_interval: 3_600_000 } });
    assert.equal(uploadQuota(config.uploads, "team-a"), undefined);
    assert.equal(config.artifacts.cache_size, 10 * 1024 ** 3);
  });

  it("gives each tenant quota_per_tenant unless tenant_quotas names it", async () => {
    const config = await load({
      uploads: { quota_per_tenant: "2GiB", tenant_quotas: { "team-a": "5GiB" } },
      artifacts: { cache_size: "1GiB" },
    });
    assert.equal(uploadQuota(config.uploads, "team-a"), 5 * 1024 ** 3);
    assert.equal(uploadQuota(config.uploads, "team-b"), 2 * 1024 ** 3);
    assert.equal(config.artifacts.cache_size, 1024 ** 3);
  });

  it("refuses bad sizes, tenant names, counts and durations, naming the field", async () => {
    for (const [settings, field, reason] of [
      [{ uploads: { quota_per_tenant: "lots" } }, "uploads.quota_per_tenant", /is not a size/],
      [{ uploads: { quota_per_tenant: -1 } }, "uploads.quota_per_tenant", /./],
      [{ uploads: { tenant_quotas: { "Team A": "1GiB" } } }, "uploads.tenant_quotas", /lower-case/],
      [{ uploads: { tenant_quotas: { "team-a": "1 parsec" } } }, "uploads.tenant_quotas.team-a", /is not a size/],
      [{ uploads: { retention: { keep_releases: 0 } } }, "uploads.retention.keep_releases", /./],
      [{ uploads: { retention: { min_age: "a day" } } }, "uploads.retention.min_age", /is not a duration/],
      [{ uploads: { quota: "1GiB" } }, "uploads", /quota/],
      [{ artifacts: { cache_size: "big" } }, "artifacts.cache_size", /is not a size/],
    ] as const) {
      await assert.rejects(load(settings), (err: Error) => {
        assert.ok(err.message.includes(`manent.yml: ${field}`), `${err.message} names ${field}`);
        assert.match(err.message, reason);
        return true;
      });
    }
  });

  it("writes sizes as people read them", () => {
    assert.equal(formatBytes(1), "1 byte");
    assert.equal(formatBytes(600), "600 bytes");
    assert.equal(formatBytes(2048), "2 KiB");
    assert.equal(formatBytes(1536 * 1024), "1.5 MiB");
    assert.equal(formatBytes(5 * 1024 ** 3), "5 GiB");
  });
});
