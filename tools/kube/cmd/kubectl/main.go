// kubectl for manent's tests and doc tests: the upstream command, built from the published module
// at the control plane's version (scripts/ci/kube-control-plane.sh sets the version with -ldflags).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
