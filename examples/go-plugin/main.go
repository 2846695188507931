// Command go-plugin is manent's sample external plugin in Go: it "deploys" an artifact by
// writing files under the directory of the `base` param. It shows every part of the SDK a real
// plugin uses: a secret read through the host, dry-run, current release, rollback, a permanent
// error, parallel targets and logging. The TypeScript sample (examples/ts-plugin) behaves the
// same, and test/interop checks both.
//
//	cd examples/go-plugin && go build -o ../../.tools/bin/manent-plugin-go-sample .
package main

import "github.com/manent-deployer/manent/sdk/go/external"

func main() {
	external.Serve(Factory)
}
