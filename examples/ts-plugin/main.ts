#!/usr/bin/env -S node --import tsx
// The sample TypeScript external plugin. The host runs a private copy of the command, so install
// the self-contained bundle built by `node --import tsx examples/ts-plugin/build.ts`.
import { serve } from "../../src/sdk.js";
import { fileDeployerFactory } from "./file-deployer.js";

serve(fileDeployerFactory).catch((err: unknown) => {
  process.stderr.write(`plugin failed to start: ${String(err)}\n`);
  process.exit(1);
});
