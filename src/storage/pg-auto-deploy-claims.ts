import type pg from "pg";
import type { DeployKey } from "../core/engine/deploy-store.js";
import type { AutoDeployClaims } from "../core/sync/auto-deploy.js";

/** The auto-deploy claims in `manent.auto_deploys`: the primary key (key and content) makes a claim one server's. */
export class PgAutoDeployClaims implements AutoDeployClaims {
  constructor(private readonly pool: pg.Pool) {}

  async claim(k: DeployKey, sha256: string, commit: string): Promise<boolean> {
    const r = await this.pool.query(
      `insert into manent.auto_deploys (tenant, application, artifact, environment, sha256, commit)
       values ($1, $2, $3, $4, $5, $6) on conflict do nothing`,
      [k.tenant, k.application, k.artifact, k.environment, sha256, commit],
    );
    return r.rowCount === 1;
  }

  async settle(k: DeployKey, sha256: string, outcome: { deploy_id: string } | { error: string }): Promise<void> {
    await this.pool.query(
      `update manent.auto_deploys set deploy_id = $6, error = $7
       where tenant = $1 and application = $2 and artifact = $3 and environment = $4 and sha256 = $5`,
      [
        k.tenant,
        k.application,
        k.artifact,
        k.environment,
        sha256,
        "deploy_id" in outcome ? outcome.deploy_id : null,
        "error" in outcome ? outcome.error : null,
      ],
    );
  }

  async drop(k: DeployKey, sha256: string): Promise<void> {
    await this.pool.query(
      `delete from manent.auto_deploys
       where tenant = $1 and application = $2 and artifact = $3 and environment = $4 and sha256 = $5 and deploy_id is null`,
      [k.tenant, k.application, k.artifact, k.environment, sha256],
    );
  }
}
