package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/manent-deployer/manent/sdk/go/plugin"
)

// SecretName is the secret every deploy reads: its sha256 lands in each target's directory,
// which proves the value crossed the broker without writing the value itself.
const SecretName = "deploy-key"

// Factory builds the sample deployer. Config: `name` (optional, default "sample-go").
func Factory(cfg map[string]any, log *slog.Logger) (plugin.Deployer, error) {
	name := "sample-go"
	if v, ok := cfg["name"]; ok {
		s, isString := v.(string)
		if !isString || s == "" {
			return nil, fmt.Errorf("config field name: want a non-empty string, got %v", v)
		}
		name = s
	}
	return &sample{name: name, log: log}, nil
}

type sample struct {
	name string
	log  *slog.Logger
}

func (s *sample) Name() string { return s.name }

// Supports any artifact of type "file".
func (s *sample) Supports(a plugin.Artifact) bool { return a.Type == "file" }

func (s *sample) ParallelTargets() bool { return true }

// params are the envconfig params the sample reads.
type params struct {
	base string // absolute directory the targets live under
	// failHost makes the deploy of that target fail (a transient error), to show partial results.
	failHost string
	// delay is waited on each target (param delay_ms), so a test can interrupt a deploy.
	delay time.Duration
	// failWeight makes SetCandidateWeight fail at that weight (param fail_weight; -1: never), to
	// drive a rollout's revert path.
	failWeight int
	// replicas is the candidate's size at weight 100 (param replicas, default 4).
	replicas int
}

// parseParams rejects a request no retry can fix with a permanent error naming the param.
func parseParams(p map[string]string) (params, error) {
	out := params{base: p["base"], failHost: p["fail_host"], failWeight: -1, replicas: 4}
	if out.base == "" || !filepath.IsAbs(out.base) {
		return out, plugin.Permanent(fmt.Errorf("param base: want an absolute directory, got %q", out.base))
	}
	if raw, ok := p["delay_ms"]; ok {
		ms, err := strconv.Atoi(raw)
		if err != nil || ms < 0 || ms > 600_000 {
			return out, plugin.Permanent(fmt.Errorf("param delay_ms: want an integer from 0 to 600000, got %q", raw))
		}
		out.delay = time.Duration(ms) * time.Millisecond
	}
	if raw, ok := p["fail_weight"]; ok {
		w, err := strconv.Atoi(raw)
		if err != nil || w < 0 || w > 100 {
			return out, plugin.Permanent(fmt.Errorf("param fail_weight: want an integer from 0 to 100, got %q", raw))
		}
		out.failWeight = w
	}
	if raw, ok := p["replicas"]; ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 1000 {
			return out, plugin.Permanent(fmt.Errorf("param replicas: want an integer from 1 to 1000, got %q", raw))
		}
		out.replicas = n
	}
	return out, nil
}

// targetDir is where a target's releases live; the host name is checked so it cannot escape base.
func targetDir(base string, t plugin.Target) (string, error) {
	if t.Host == "" || t.Host == "." || t.Host == ".." || strings.ContainsAny(t.Host, `/\`) {
		return "", plugin.Permanent(fmt.Errorf("target %q: not usable as a directory name", t.Host))
	}
	return filepath.Join(base, t.Host), nil
}

func (s *sample) Validate(_ context.Context, req *plugin.Request) error {
	if _, err := parseParams(req.Params); err != nil {
		return err
	}
	if req.Artifact.Version == "" {
		return plugin.Permanent(errors.New("artifact version is empty"))
	}
	for _, t := range req.Targets {
		if _, err := targetDir("/", t); err != nil {
			return err
		}
	}
	return nil
}

// Deploy writes, for each target under <base>/<host>/: releases/<version>/artifact (the
// artifact's bytes when the host gave a path, else its name), key.sha256 (the secret's hash)
// and current (the version). The TypeScript sample writes the same.
func (s *sample) Deploy(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return nil, err
	}
	// The secret is read once per deploy, before any target; a deploy with no targets touches
	// nothing, not even the host's Secrets service.
	var keyHash string
	if len(req.Targets) > 0 {
		v, err := req.Secrets.Secret(ctx, SecretName)
		if err != nil {
			return nil, fmt.Errorf("reading secret %s: %w", SecretName, err)
		}
		sum := sha256.Sum256([]byte(v))
		keyHash = hex.EncodeToString(sum[:])
	}
	s.log.Info("deploy started", "deployment", req.DeploymentID, "targets", len(req.Targets), "parallelism", req.Parallelism)
	targets, err := plugin.ForEachTarget(ctx, req, func(ctx context.Context, t plugin.Target) (plugin.TargetResult, error) {
		dir, err := targetDir(p.base, t)
		if err != nil {
			return plugin.TargetResult{}, err
		}
		if err := sleep(ctx, p.delay); err != nil {
			return plugin.TargetResult{}, err
		}
		if t.Host == p.failHost {
			return plugin.TargetResult{}, fmt.Errorf("target %s: failing as param fail_host asks", t.Host)
		}
		if err := s.release(dir, req.Artifact, keyHash); err != nil {
			return plugin.TargetResult{}, fmt.Errorf("target %s: %w", t.Host, err)
		}
		s.log.Info("target deployed", "host", t.Host, "version", req.Artifact.Version)
		return plugin.TargetResult{Status: plugin.StatusDeployed, Details: map[string]string{"path": dir}}, nil
	})
	return &plugin.Result{Plugin: s.name, Targets: targets}, err
}

func (s *sample) release(dir string, a plugin.Artifact, keyHash string) error {
	if err := writeRelease(dir, a, keyHash); err != nil {
		return err
	}
	return setCurrent(dir, a.Version)
}

// writeRelease writes releases/<version>/artifact and key.sha256, without switching current.
func writeRelease(dir string, a plugin.Artifact, keyHash string) error {
	rel := filepath.Join(dir, "releases", a.Version)
	if err := os.MkdirAll(rel, 0o755); err != nil {
		return err
	}
	content := []byte(a.Name + "\n")
	if a.Path != "" {
		b, err := os.ReadFile(a.Path)
		if err != nil {
			return fmt.Errorf("reading artifact %s: %w", a.Path, err)
		}
		content = b
	}
	if err := os.WriteFile(filepath.Join(rel, "artifact"), content, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "key.sha256"), []byte(keyHash+"\n"), 0o600)
}

// setCurrent records the version a target runs; "" removes the record (nothing deployed). The
// write goes through a rename so a reader never sees half a version.
func setCurrent(dir, version string) error {
	cur := filepath.Join(dir, "current")
	if version == "" {
		if err := os.Remove(cur); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := cur + ".tmp"
	if err := os.WriteFile(tmp, []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, cur)
}

func readCurrent(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "current"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// DryRun checks each target could be written and reports it ready, changing nothing.
func (s *sample) DryRun(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return nil, err
	}
	targets, err := plugin.ForAllTargets(ctx, req, func(ctx context.Context, t plugin.Target) (plugin.TargetResult, error) {
		dir, err := targetDir(p.base, t)
		if err != nil {
			return plugin.TargetResult{}, err
		}
		cur, err := readCurrent(dir)
		if err != nil {
			return plugin.TargetResult{}, fmt.Errorf("target %s: %w", t.Host, err)
		}
		if cur == req.Artifact.Version {
			return plugin.TargetResult{Status: plugin.StatusUnchanged, Details: map[string]string{"current": cur}}, nil
		}
		return plugin.TargetResult{Status: plugin.StatusReady, Details: map[string]string{"current": cur}}, nil
	})
	return &plugin.Result{Plugin: s.name, Targets: targets}, err
}

// CurrentRelease reads each target's current version ("" when nothing was deployed).
func (s *sample) CurrentRelease(_ context.Context, req *plugin.Request) ([]plugin.TargetRelease, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return nil, err
	}
	out := make([]plugin.TargetRelease, 0, len(req.Targets))
	for _, t := range req.Targets {
		dir, err := targetDir(p.base, t)
		if err != nil {
			return nil, err
		}
		v, err := readCurrent(dir)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", t.Host, err)
		}
		out = append(out, plugin.TargetRelease{Host: t.Host, Version: v})
	}
	return out, nil
}

// Rollback puts back the version each target ran before the deploy, on every target.
func (s *sample) Rollback(ctx context.Context, req *plugin.RollbackRequest) (*plugin.Result, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return nil, err
	}
	previous := make(map[string]string, len(req.Releases))
	for _, r := range req.Releases {
		previous[r.Host] = r.Version
	}
	targets, err := plugin.ForAllTargets(ctx, &req.Request, func(ctx context.Context, t plugin.Target) (plugin.TargetResult, error) {
		dir, err := targetDir(p.base, t)
		if err != nil {
			return plugin.TargetResult{}, err
		}
		version, ok := previous[t.Host]
		if !ok {
			return plugin.TargetResult{}, plugin.Permanent(fmt.Errorf("target %s: no checkpointed release to roll back to", t.Host))
		}
		if err := setCurrent(dir, version); err != nil {
			return plugin.TargetResult{}, fmt.Errorf("target %s: %w", t.Host, err)
		}
		s.log.Info("target rolled back", "host", t.Host, "version", version)
		return plugin.TargetResult{Status: plugin.StatusRolledBack, Details: map[string]string{"version": version}}, nil
	})
	return &plugin.Result{Plugin: s.name, Targets: targets}, err
}

// sleep waits d, or less when the deploy is cancelled.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
