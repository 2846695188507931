package main

import (
	"context"
	"sort"
	"strconv"
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

// run is the script. Every step has a fresh request; the steps after Configure are:
//
//	validate, validate_bad_param        Validate ok, then a bad param (permanent: aborted)
//	deploy_v1, current_after_v1         a Deploy reading a secret, and what the targets run
//	dry_run_v2, current_after_dry_run   a DryRun changes nothing; the latter is the checkpoint
//	deploy_v2, rollback, current_after_rollback
//	deploy_bad_param                    permanent error: aborted
//	deploy_missing_secret               the host has no deploy-key: not_found
//	deploy_fail_beta                    one target fails: the per-target results survive the error
//	deploy_no_targets                   a no-op round trip that reads no secret
//
// then a percentage rollout of v4 (see rollout), its revert path with v5, and a candidate
// deploy without the traffic state (refused by the plugin: failed_precondition).
func run(ctx context.Context, d *host.Remote, cfg map[string]any, base, secret string) Report {
	var report Report
	name, caps, err := d.Configure(ctx, cfg)
	if err != nil {
		report.Steps = append(report.Steps, Step{Name: "configure", Error: errorJSON(err, nil), SecretsRead: []string{}})
		return report
	}
	report.Plugin, report.Capabilities = name, caps

	all := []plugin.Target{
		{Host: "alpha", Labels: map[string]string{}},
		{Host: "beta", Labels: map[string]string{}},
		{Host: "gamma", Labels: map[string]string{}},
	}
	secrets := map[string]string{"deploy-key": secret}
	good := map[string]string{"base": base}
	bad := map[string]string{"base": "relative/dir"}
	request := func(version string, params map[string]string, secrets map[string]string) (*plugin.Request, *recordingSecrets) {
		rs := &recordingSecrets{values: secrets}
		return &plugin.Request{
			DeploymentID: "dep-" + version,
			Tenant:       "acme",
			Application:  "web",
			Environment:  "staging",
			Artifact:     plugin.Artifact{Type: "file", Name: "web", Version: version, Source: "inline"},
			Targets:      all,
			Params:       params,
			Secrets:      rs,
			Parallelism:  2,
		}, rs
	}
	step := func(name string, rs *recordingSecrets, call func() (any, error)) {
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
	deploy := func(name, version string, params, secrets map[string]string, edit func(*plugin.Request)) {
		req, rs := request(version, params, secrets)
		if edit != nil {
			edit(req)
		}
		step(name, rs, func() (any, error) { return d.Deploy(ctx, req) })
	}
	current := func(name string) []plugin.TargetRelease {
		req, rs := request("", good, secrets)
		var releases []plugin.TargetRelease
		step(name, rs, func() (any, error) {
			var err error
			releases, err = d.CurrentRelease(ctx, req)
			return releases, err
		})
		return releases
	}

	req, rs := request("v1", good, secrets)
	step("validate", rs, func() (any, error) { return nil, d.Validate(ctx, req) })
	req, rs = request("v1", bad, secrets)
	step("validate_bad_param", rs, func() (any, error) { return nil, d.Validate(ctx, req) })
	deploy("deploy_v1", "v1", good, secrets, nil)
	current("current_after_v1")
	req, rs = request("v2", good, secrets)
	step("dry_run_v2", rs, func() (any, error) { return d.DryRun(ctx, req) })
	checkpoint := current("current_after_dry_run")
	deploy("deploy_v2", "v2", good, secrets, nil)
	req, rs = request("v2", good, secrets)
	step("rollback", rs, func() (any, error) {
		return d.Rollback(ctx, &plugin.RollbackRequest{Request: *req, Releases: checkpoint})
	})
	current("current_after_rollback")
	deploy("deploy_bad_param", "v3", bad, secrets, nil)
	deploy("deploy_missing_secret", "v3", good, map[string]string{}, nil)
	deploy("deploy_fail_beta", "v3", map[string]string{"base": base, "fail_host": "beta"}, secrets, func(r *plugin.Request) { r.Parallelism = 1 })
	deploy("deploy_no_targets", "v3", good, secrets, func(r *plugin.Request) { r.Targets = []plugin.Target{} })

	// A percentage rollout of v4: every call gets a fresh request carrying the state PrepareSlots
	// returned in Request.Traffic.
	var traffic map[string]string
	slotCall := func(name, version string, params map[string]string, call func(*plugin.Request) (any, error)) {
		req, rs := request(version, params, secrets)
		req.Traffic = traffic
		step(name, rs, func() (any, error) { return call(req) })
	}
	weighted := func(prefix, version string, params map[string]string, weight int) {
		w := strconv.Itoa(weight)
		slotCall(prefix+"set_weight_"+w, version, params, func(r *plugin.Request) (any, error) { return nil, d.SetCandidateWeight(ctx, r, weight) })
		slotCall(prefix+"scale_"+w, version, params, func(r *plugin.Request) (any, error) { return nil, d.ScaleCandidate(ctx, r, weight) })
		slotCall(prefix+"weight_"+w, version, params, func(r *plugin.Request) (any, error) { return d.CandidateWeight(ctx, r) })
	}
	prepare := func(name, version string) {
		traffic = nil
		slotCall(name, version, good, func(r *plugin.Request) (any, error) {
			state, err := d.PrepareSlots(ctx, r)
			traffic = state
			return state, err
		})
	}
	prepare("prepare_slots", "v4")
	slotCall("deploy_candidate", "v4", good, func(r *plugin.Request) (any, error) { return d.DeployCandidate(ctx, r) })
	slotCall("route_testers", "v4", good, func(r *plugin.Request) (any, error) { return d.RouteTesters(ctx, r) })
	for _, w := range []int{10, 50, 100} {
		weighted("", "v4", good, w)
	}
	slotCall("promote", "v4", good, func(r *plugin.Request) (any, error) { return nil, d.PromoteCandidate(ctx, r) })
	slotCall("retire_previous", "v4", good, func(r *plugin.Request) (any, error) { return nil, d.RetirePrevious(ctx, r) })
	current("current_after_promote")

	// The revert path with v5: the weight change to 50 fails, traffic goes back to 0, the candidate is removed.
	failing := map[string]string{"base": base, "fail_weight": "50"}
	prepare("revert_prepare_slots", "v5")
	slotCall("revert_deploy_candidate", "v5", failing, func(r *plugin.Request) (any, error) { return d.DeployCandidate(ctx, r) })
	for _, w := range []int{10, 50, 0} {
		slotCall("revert_set_weight_"+strconv.Itoa(w), "v5", failing, func(r *plugin.Request) (any, error) { return nil, d.SetCandidateWeight(ctx, r, w) })
	}
	slotCall("revert_candidate", "v5", failing, func(r *plugin.Request) (any, error) { return nil, d.RevertCandidate(ctx, r) })
	slotCall("revert_weight", "v5", failing, func(r *plugin.Request) (any, error) { return d.CandidateWeight(ctx, r) })
	current("current_after_revert")

	traffic = nil
	slotCall("deploy_candidate_without_traffic", "v6", good, func(r *plugin.Request) (any, error) { return d.DeployCandidate(ctx, r) })
	return report
}

func errorJSON(err error, partial *plugin.Result) *ErrorJSON {
	return &ErrorJSON{Code: plugin.CodeOf(err).String(), Message: err.Error(), Details: plugin.DetailsOf(err), Partial: partial}
}
