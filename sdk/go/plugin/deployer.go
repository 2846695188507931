package plugin

import (
	"context"
	"log/slog"
)

// Deployer is the contract every plugin implements.
type Deployer interface {
	// Name is the plugin's name, as in manent.yml and Result.Plugin.
	Name() string
	// Supports tells whether this plugin can deploy the artifact.
	Supports(a Artifact) bool
	// Validate checks the request without touching targets and without secrets.
	Validate(ctx context.Context, req *Request) error
	Deploy(ctx context.Context, req *Request) (*Result, error)
}

// DryRunner is optional: a dry-run that checks everything the deploy would do and changes nothing.
type DryRunner interface {
	DryRun(ctx context.Context, req *Request) (*Result, error)
}

// ReleaseInspector is optional: tells the release each target runs now.
type ReleaseInspector interface {
	CurrentRelease(ctx context.Context, req *Request) ([]TargetRelease, error)
}

// Rollbacker is optional: returns targets to the releases recorded in the checkpoint. It counts
// only together with ReleaseInspector: without the current release there is nothing to go back to.
type Rollbacker interface {
	Rollback(ctx context.Context, req *RollbackRequest) (*Result, error)
}

// DriftInspector is optional: tells what runs on each target and whether it still matches the
// release req.Artifact.Version names (the last deploy's), changing nothing. One TargetDrift per
// target, named by its ID.
type DriftInspector interface {
	Drift(ctx context.Context, req *Request) ([]TargetDrift, error)
}

// ParallelDeployer is optional: the plugin honours Request.Parallelism.
type ParallelDeployer interface {
	ParallelTargets() bool
}

// SlotDeployer is optional, for percentage rollouts: a second slot beside the running release.
type SlotDeployer interface {
	PrepareSlots(ctx context.Context, req *Request) (map[string]string, error)
	DeployCandidate(ctx context.Context, req *Request) (*Result, error)
	PromoteCandidate(ctx context.Context, req *Request) error
	RevertCandidate(ctx context.Context, req *Request) error
	RetirePrevious(ctx context.Context, req *Request) error
}

// TrafficRouter is optional, for percentage rollouts: moves traffic between slots (weight 0–100).
type TrafficRouter interface {
	SetCandidateWeight(ctx context.Context, req *Request, weight int) error
	CandidateWeight(ctx context.Context, req *Request) (int, error)
}

// TesterRouter is optional, for percentage rollouts: routes testers to the candidate.
type TesterRouter interface {
	RouteTesters(ctx context.Context, req *Request) (map[string]string, error)
}

// SlotScaler is optional, for percentage rollouts: scales the candidate with its weight.
type SlotScaler interface {
	ScaleCandidate(ctx context.Context, req *Request, weight int) error
}

// Factory builds a deployer from its manent.yml configuration; an error is a bad configuration.
// The same Factory serves a plugin compiled into manent and one served by external.Serve.
type Factory func(cfg map[string]any, log *slog.Logger) (Deployer, error)
