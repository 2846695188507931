// kube-apiserver for manent's tests: the upstream command, built from the published module
// (scripts/ci/kube-control-plane.sh sets the version with -ldflags).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
