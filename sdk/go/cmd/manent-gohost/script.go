package main

import (
	"context"
	"sort"
	"sync"

	"github.com/manent-deployer/manent/sdk/go/host"
	"github.com/manent-deployer/manent/sdk/go/plugin"
)

// Step is one call of the script as printed: its result, or its error with any partial result.
type Step struct {
	Name   string     `json:"name"`
	Result any        `json:"result,omitempty"`
	Error  *ErrorJSON `json:"error,omitempty"`
	// SecretsRead are the secret names the plugin asked the host for during the call.
	SecretsRead []string `json:"secrets_read"`
}

// ErrorJSON is a failed call's error in manent's JSON form, plus the partial result, if any.
type ErrorJSON struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Details map[string]string `json:"details,omitempty"`
	Partial *plugin.Result    `json:"partial_result,omitempty"`
}

// Report is the whole run.
type Report struct {
	Plugin       string   `json:"plugin"`
	Capabilities []string `json:"capabilities"`
	Steps        []Step   `json:"steps"`
}

// recordingSecrets serves the script's secrets and records which names the plugin read.
type recordingSecrets struct {
	values host.StaticSecrets
	mu     sync.Mutex
	read   []string
}

func (s *recordingSecrets) Secret(ctx context.Context, name string) (string, error) {
	s.mu.Lock()
	s.read = append(s.read, name)
	s.mu.Unlock()
	return s.values.Secret(ctx, name)
}

func (s *recordingSecrets) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string{}, s.read...)
	sort.Strings(out)
	return out
}

// run is the script: Configure; a Deploy of v1 with a secret; CurrentRelease; a DryRun of v2
// (nothing changes); the checkpoint and a Deploy of v2; a Rollback to the checkpoint; a Deploy
// with a missing param (permanent); a Deploy whose secret is not defined; a Deploy that fails on
// one target (partial results); an UNIMPLEMENTED call (PrepareSlots).
func run(ctx context.Context, d *host.Remote, cfg map[string]any, base, secret string) Report {
	var report Report
	name, caps, err := d.Configure(ctx, cfg)
	if err != nil {
		report.Steps = append(report.Steps, Step{Name: "configure", Error: errorJSON(err, nil)})
		return report
	}
	report.Plugin, report.Capabilities = name, caps

	targets := []plugin.Target{
		{Host: "alpha", Labels: map[string]string{}},
		{Host: "beta", Labels: map[string]string{}},
		{Host: "gamma", Labels: map[string]string{}},
	}
	request := func(version string, params map[string]string, secrets map[string]string) (*plugin.Request, *recordingSecrets) {
		rs := &recordingSecrets{values: secrets}
		return &plugin.Request{
			DeploymentID: "dep-" + version,
			Tenant:       "acme",
			Application:  "web",
			Environment:  "staging",
			Artifact:     plugin.Artifact{Type: "file", Name: "web", Version: version, Source: "/dev/null"},
			Targets:      targets,
			Params:       params,
			Secrets:      rs,
			Parallelism:  2,
		}, rs
	}
	good := map[string]string{"base": base}
	secrets := map[string]string{"deploy-key": secret}

	step := func(name string, call func() (any, error), rs *recordingSecrets) {
		res, err := call()
		s := Step{Name: name, SecretsRead: rs.names()}
		if err != nil {
			partial, _ := res.(*plugin.Result)
			s.Error = errorJSON(err, partial)
		} else {
			s.Result = res
		}
		report.Steps = append(report.Steps, s)
	}
	deploy := func(req *plugin.Request) func() (any, error) {
		return func() (any, error) { return d.Deploy(ctx, req) }
	}
	current := func(req *plugin.Request) func() (any, error) {
		return func() (any, error) { return d.CurrentRelease(ctx, req) }
	}

	req, rs := request("v1", good, secrets)
	step("validate", func() (any, error) { return nil, d.Validate(ctx, req) }, rs)
	step("deploy_v1", deploy(req), rs)
	req, rs = request("v1", good, secrets)
	step("current_after_v1", current(req), rs)
	req, rs = request("v2", good, secrets)
	step("dry_run_v2", func() (any, error) { return d.DryRun(ctx, req) }, rs)
	req, rs = request("v2", good, secrets)
	checkpoint, cerr := d.CurrentRelease(ctx, req)
	step("current_after_dry_run", func() (any, error) { return checkpoint, cerr }, rs)
	req, rs = request("v2", good, secrets)
	step("deploy_v2", deploy(req), rs)
	req, rs = request("v2", good, secrets)
	step("rollback", func() (any, error) {
		return d.Rollback(ctx, &plugin.RollbackRequest{Request: *req, Releases: checkpoint})
	}, rs)
	req, rs = request("v2", good, secrets)
	step("current_after_rollback", current(req), rs)
	req, rs = request("v3", map[string]string{}, secrets)
	step("deploy_missing_base", deploy(req), rs)
	req, rs = request("v3", good, map[string]string{})
	step("deploy_missing_secret", deploy(req), rs)
	req, rs = request("v3", map[string]string{"base": base, "fail_host": "beta"}, secrets)
	req.Parallelism = 1
	step("deploy_fail_beta", deploy(req), rs)
	req, rs = request("v3", good, secrets)
	step("prepare_slots", func() (any, error) { return d.PrepareSlots(ctx, req) }, rs)
	return report
}

func errorJSON(err error, partial *plugin.Result) *ErrorJSON {
	return &ErrorJSON{Code: plugin.CodeOf(err).String(), Message: err.Error(), Details: plugin.DetailsOf(err), Partial: partial}
}
