import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ManentError } from "../../../src/plugin.js";
import { KubernetesDeployer } from "../../../src/plugins/kubernetes/index.js";
import { makeRequest, memoryLogger } from "./helpers.js";

const access = { token: "t", caPem: "", user: "u" };

/** A kubernetes target is the API server it reaches (whatever it is called) and the namespace: two names of one are refused. */
describe("kubernetes: target identity is the API server reached and the namespace", () => {
  const validate = (clusters: { host: string; port: number }[]) =>
    new KubernetesDeployer(memoryLogger()).validate(
      makeRequest({ version: "1.0.0", clusters, access: clusters.map(() => access), artifactPath: "" }),
    );

  it("refuses 127.0.0.1 and localhost on one port, naming both; accepts two API servers", async () => {
    await assert.rejects(
      validate([
        { host: "127.0.0.1", port: 6443 },
        { host: "localhost", port: 6443 },
      ]),
      (err: unknown) => {
        assert.ok(err instanceof ManentError && err.code === Code.InvalidArgument, String(err));
        assert.equal(
          err.message,
          "kubernetes: targets 127.0.0.1 and localhost reach the same API server (127.0.0.1:6443) and namespace hello: they would be one target, deployed once; remove one",
        );
        return true;
      },
    );
    await validate([
      { host: "127.0.0.1", port: 6443 },
      { host: "localhost", port: 6444 },
    ]);
  });
});
