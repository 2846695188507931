package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/manent-deployer/manent/sdk/go/plugin"
)

// probe is the deployer the SDK tests serve: it reads a secret, fails on request with a
// partial result, and keeps the last call's Secrets to show it dies with the call.
type probe struct {
	log    *slog.Logger
	serial bool // ParallelTargets() false

	mu    sync.Mutex
	stale plugin.Secrets
}

func probeFactory(cfg map[string]any, log *slog.Logger) (plugin.Deployer, error) {
	if cfg["broken"] == true {
		return nil, errors.New("config field broken: the probe refuses it")
	}
	if cfg["drift"] == true {
		return &driftProbe{probe{log: log}}, nil
	}
	return &probe{log: log, serial: cfg["serial"] == true}, nil
}

// driftProbe also reports drift: each target "runs" the version its label `runs` names, and
// the secret "token" must be readable during the call.
type driftProbe struct{ probe }

func (p *driftProbe) Drift(ctx context.Context, req *plugin.Request) ([]plugin.TargetDrift, error) {
	if _, err := req.Secrets.Secret(ctx, "token"); err != nil {
		return nil, fmt.Errorf("reading secret token: %w", err)
	}
	out := make([]plugin.TargetDrift, len(req.Targets))
	for i, t := range req.Targets {
		live := t.Labels["runs"]
		d := plugin.TargetDrift{Host: t.ID(), Status: plugin.DriftInSync, Version: live, Changes: []plugin.DriftChange{}}
		if live != req.Artifact.Version {
			d.Status = plugin.DriftDrifted
			d.Changes = []plugin.DriftChange{{Object: "release", Field: "version", Expected: req.Artifact.Version, Live: live}}
		}
		out[i] = d
	}
	return out, nil
}

// blocked reports, for the cancellation test, that a "block" deploy started and then how its
// context ended (the test and the in-process plugin share the address space).
var blocked = struct {
	started chan struct{}
	ended   chan error
}{make(chan struct{}, 1), make(chan error, 1)}

func (p *probe) Name() string                    { return "probe" }
func (p *probe) Supports(a plugin.Artifact) bool { return a.Type == "file" }
func (p *probe) ParallelTargets() bool           { return !p.serial }

func (p *probe) Validate(_ context.Context, req *plugin.Request) error {
	if req.Params["mode"] == "invalid" {
		return &plugin.Error{Code: plugin.CodeInvalidArgument, Message: "param mode: invalid", Details: map[string]string{"field": "mode"}}
	}
	// Validate gets no secrets.
	if _, err := req.Secrets.Secret(context.Background(), "token"); plugin.CodeOf(err) != plugin.CodeFailedPrecondition {
		return fmt.Errorf("validate could read a secret (err %v)", err)
	}
	return nil
}

func (p *probe) Deploy(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	switch req.Params["mode"] {
	case "stale":
		p.mu.Lock()
		stale := p.stale
		p.mu.Unlock()
		_, err := stale.Secret(ctx, "token")
		return nil, fmt.Errorf("stale secrets: %w", err)
	case "block":
		blocked.started <- struct{}{}
		<-ctx.Done()
		blocked.ended <- ctx.Err()
		return nil, ctx.Err()
	case "permanent":
		return nil, plugin.Permanent(errors.New("param mode: permanent failure asked"))
	}
	p.mu.Lock()
	p.stale = req.Secrets
	p.mu.Unlock()
	token, err := req.Secrets.Secret(ctx, "token")
	if err != nil {
		return nil, fmt.Errorf("reading secret token: %w", err)
	}
	p.log.Info("deploying", "deployment", req.DeploymentID, "parallelism", req.Parallelism)
	targets, err := plugin.ForEachTarget(ctx, req, func(_ context.Context, t plugin.Target) (plugin.TargetResult, error) {
		if t.Host == req.Params["fail_host"] {
			return plugin.TargetResult{}, plugin.Permanent(fmt.Errorf("target %s: refused", t.Host))
		}
		return plugin.TargetResult{Details: map[string]string{"token_len": fmt.Sprint(len(token))}}, nil
	})
	return &plugin.Result{Plugin: "probe", Targets: targets, Details: map[string]string{"parallelism": fmt.Sprint(req.Parallelism)}}, err
}
