#!/usr/bin/env bash
# What the external-plugin tests (test/external, test/conformance) need, idempotent.
# - setpriv (util-linux, in every Debian base image): the host kills plugins with itself through it.
# - go (optional): test/external/parent-death.test.ts builds examples/go-plugin to check that a
#   go-plugin plugin does not outlive its host; without go that case is skipped.
# The TypeScript plugins are bundled by the tests themselves (esbuild, an npm devDependency).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v setpriv >/dev/null; then
  apt-get update -qq && apt-get install -y -qq util-linux
fi
# Prebuilt binaries for manual runs and benches (bench/external-ts.ts builds its own copies).
mkdir -p .tools/bin
node --import tsx examples/ts-plugin/build.ts .tools/bin/manent-ts-sample-plugin >/dev/null
if command -v go >/dev/null; then
  (cd examples/go-plugin && go build -o ../../.tools/bin/manent-plugin-go-sample .)
fi
