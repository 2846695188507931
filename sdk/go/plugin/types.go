// Package plugin is the contract between manent and a deployer plugin, built in or external.
//
// The JSON form of the types matches the TypeScript contract (src/core/contract) field for
// field, so a result printed by a Go plugin or host reads the same as one from manent.
package plugin

import "context"

// Artifact is what to deploy: the descriptor's artifact plus where manent cached the bytes.
type Artifact struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	// Source is where the artifact came from: a local path or an http(s) URL.
	Source string `json:"source"`
	// SHA256 is the hex sha256 of the bytes, when known.
	SHA256 string `json:"sha256,omitempty"`
	// Path is the local path of the verified copy on the host's machine.
	Path string `json:"path,omitempty"`
}

// Target is a place a plugin deploys to: a host, a cluster, a region.
type Target struct {
	Host   string            `json:"host"`
	Port   int               `json:"port,omitempty"`
	Labels map[string]string `json:"labels"`
	// Name is the target's identity in the deploy: the envconfig's name, else its host. manent
	// refuses two targets with one identity, so results and releases name their target by it.
	Name string `json:"name,omitempty"`
}

// ID is the target's identity: its Name, or its Host when the host sent none (earlier manent).
// TargetResult.Host and TargetRelease.Host carry it.
func (t Target) ID() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Host
}

// Secrets gives access to the secrets named in the envconfig. It works only while the call
// that received it runs: afterwards every lookup fails with CodeFailedPrecondition.
type Secrets interface {
	Secret(ctx context.Context, name string) (string, error)
}

// Request is what Deploy and the other per-deploy calls receive.
type Request struct {
	DeploymentID string   `json:"deployment_id"`
	Tenant       string   `json:"tenant"`
	Application  string   `json:"application"`
	Environment  string   `json:"environment"`
	Artifact     Artifact `json:"artifact"`
	Targets      []Target `json:"targets"`
	// Params are the envconfig params after CLI overrides.
	Params  map[string]string `json:"params"`
	Secrets Secrets           `json:"-"`
	// Parallelism is how many targets the plugin may work on at once: 1 unless the plugin
	// implements ParallelDeployer.
	Parallelism int `json:"parallelism"`
	// Traffic is the percentage-rollout state recorded by PrepareSlots.
	Traffic map[string]string `json:"traffic,omitempty"`
	// Rollout is set on every call of a deploy that runs a canary, a dry-run's too: what the
	// rollout will ask of the plugin, so Validate can refuse a setting it lacks up front.
	Rollout *RolloutPlan `json:"rollout,omitempty"`
	// Progress, when set, is called as each target finishes (by ForEachTarget and
	// ForAllTargets), for live progress. It may be called from several goroutines at once.
	Progress func(TargetResult) `json:"-"`
}

// RolloutPlan is what a canary will ask of the plugin: slots always, and these.
type RolloutPlan struct {
	// Weights: some step sets a weight (SetCandidateWeight, or ScaleCandidate with the scale capability).
	Weights bool `json:"weights"`
	// Testers: testers: true, so RouteTesters will be called.
	Testers bool `json:"testers"`
}

// Status is the outcome of one target.
type Status string

const (
	StatusDeployed Status = "deployed"
	// StatusReady is what a dry-run reports for a target that would deploy.
	StatusReady      Status = "ready"
	StatusFailed     Status = "failed"
	StatusSkipped    Status = "skipped"
	StatusRolledBack Status = "rolled_back"
	StatusUnchanged  Status = "unchanged"
)

// TargetResult is the outcome of one target.
type TargetResult struct {
	// Host names the target the result is about: its ID (its name, which is its host unless the envconfig names it).
	Host    string            `json:"host"`
	Status  Status            `json:"status"`
	Details map[string]string `json:"details,omitempty"`
	// DurationMS is the time spent on the target (manent_target_deploy_seconds).
	DurationMS int64  `json:"duration_ms,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Result is the outcome of a deploy, dry-run or rollback.
type Result struct {
	Plugin  string            `json:"plugin"`
	Targets []TargetResult    `json:"targets"`
	Details map[string]string `json:"details,omitempty"`
}

// TargetRelease is the release a target runs; Version is "" when nothing is deployed.
type TargetRelease struct {
	// Host names the target: its ID, as in TargetResult.
	Host    string            `json:"host"`
	Version string            `json:"version"`
	Details map[string]string `json:"details,omitempty"`
}

// Drift statuses: Unknown when the plugin cannot tell (Details["reason"] says why).
const (
	DriftInSync  = "in_sync"
	DriftDrifted = "drifted"
	DriftUnknown = "unknown"
)

// DriftChange is one difference between the recorded release and what runs: Object
// "Deployment/hello", Field "spec.replicas", Expected "3", Live "5"; a file and its sha256.
type DriftChange struct {
	Object   string `json:"object"`
	Field    string `json:"field"`
	Expected string `json:"expected"`
	Live     string `json:"live"`
}

// TargetDrift is what runs on one target and whether it is still what manent deployed.
type TargetDrift struct {
	// Host names the target: its ID, as in TargetResult.
	Host string `json:"host"`
	// Status is DriftInSync, DriftDrifted or DriftUnknown.
	Status string `json:"status"`
	// Version is the release the target runs now ("" when none).
	Version string            `json:"version"`
	Changes []DriftChange     `json:"changes"`
	Details map[string]string `json:"details,omitempty"`
}

// RollbackRequest returns targets to what they ran before the deploy.
type RollbackRequest struct {
	Request
	// Releases is what each target ran before this deploy, as checkpointed.
	Releases []TargetRelease `json:"releases"`
}
