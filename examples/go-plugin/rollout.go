package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/manent-deployer/manent/sdk/go/plugin"
)

// Percentage rollouts. Each target has two slots, blue and green; the file <host>/live-slot says
// which one serves (blue when absent), <host>/slots/<slot> which version a slot holds. PrepareSlots
// picks the other slot as the candidate and returns both in its state, which the host passes back
// in Request.Traffic on every later call: the sample keeps no memory of its own between calls, so
// a call without that state fails. Weight, scale and testers are files the host's caller can read:
// <host>/weight, <host>/replicas, <host>/testers. Every call appends what it received to
// <base>/rollout.jsonl, so a test can check the state reached each call. The TypeScript sample
// behaves the same.

const (
	trafficLive      = "live_slot"
	trafficCandidate = "candidate_slot"
)

type slotPair struct{ live, candidate string }

func otherSlot(s string) string {
	if s == "blue" {
		return "green"
	}
	return "blue"
}

// slotsOf reads the state PrepareSlots returned from the request.
func slotsOf(req *plugin.Request) (slotPair, error) {
	live, candidate := req.Traffic[trafficLive], req.Traffic[trafficCandidate]
	valid := func(s string) bool { return s == "blue" || s == "green" }
	if !valid(live) || !valid(candidate) || live == candidate {
		return slotPair{}, plugin.Errorf(plugin.CodeFailedPrecondition,
			"Request.traffic lacks the state PrepareSlots returned (live_slot, candidate_slot): got %v", req.Traffic)
	}
	return slotPair{live: live, candidate: candidate}, nil
}

// journal appends one line to <base>/rollout.jsonl: the call, the traffic state it received and its weight.
func journal(base, call string, req *plugin.Request, weight *int) error {
	entry := map[string]any{"call": call, "traffic": req.Traffic}
	if req.Traffic == nil {
		entry["traffic"] = map[string]string{}
	}
	if weight != nil {
		entry["weight"] = *weight
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(base, "rollout.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

func writeAtomic(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func removeAll(paths ...string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// rolloutCall parses the params, journals the call and checks the traffic state (unless it is PrepareSlots).
func rolloutCall(req *plugin.Request, call string, weight *int) (params, slotPair, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return p, slotPair{}, err
	}
	if err := journal(p.base, call, req, weight); err != nil {
		return p, slotPair{}, err
	}
	if call == "PrepareSlots" {
		return p, slotPair{}, nil
	}
	slots, err := slotsOf(req)
	return p, slots, err
}

// eachTarget runs fn on every target in order, stopping at the first error.
func eachTarget(p params, req *plugin.Request, fn func(t plugin.Target, dir string) error) error {
	for _, t := range req.Targets {
		dir, err := targetDir(p.base, t)
		if err != nil {
			return err
		}
		if err := fn(t, dir); err != nil {
			return fmt.Errorf("target %s: %w", t.Host, err)
		}
	}
	return nil
}

// PrepareSlots finds the live slot (the same on every target) and names the other the candidate.
func (s *sample) PrepareSlots(_ context.Context, req *plugin.Request) (map[string]string, error) {
	p, _, err := rolloutCall(req, "PrepareSlots", nil)
	if err != nil {
		return nil, err
	}
	live := ""
	err = eachTarget(p, req, func(t plugin.Target, dir string) error {
		l, err := readTrimmed(filepath.Join(dir, "live-slot"))
		if err != nil {
			return err
		}
		if l == "" {
			l = "blue"
		}
		if live != "" && l != live {
			return plugin.Permanent(fmt.Errorf("live slot %s, but the targets before it serve from %s", l, live))
		}
		live = l
		// The release the target runs now is the live slot's.
		cur, err := readCurrent(dir)
		if err != nil || cur == "" {
			return err
		}
		return writeAtomic(filepath.Join(dir, "slots", l), cur)
	})
	if err != nil {
		return nil, err
	}
	if live == "" {
		live = "blue"
	}
	return map[string]string{trafficLive: live, trafficCandidate: otherSlot(live), "prepared_by": req.DeploymentID}, nil
}

// DeployCandidate writes the release into the candidate slot of each target; the live slot keeps serving.
func (s *sample) DeployCandidate(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	p, slots, err := rolloutCall(req, "DeployCandidate", nil)
	if err != nil {
		return nil, err
	}
	var keyHash string
	if len(req.Targets) > 0 {
		v, err := req.Secrets.Secret(ctx, SecretName)
		if err != nil {
			return nil, fmt.Errorf("reading secret %s: %w", SecretName, err)
		}
		sum := sha256.Sum256([]byte(v))
		keyHash = hex.EncodeToString(sum[:])
	}
	targets, err := plugin.ForEachTarget(ctx, req, func(ctx context.Context, t plugin.Target) (plugin.TargetResult, error) {
		dir, err := targetDir(p.base, t)
		if err != nil {
			return plugin.TargetResult{}, err
		}
		if t.Host == p.failHost {
			return plugin.TargetResult{}, fmt.Errorf("target %s: failing as param fail_host asks", t.Host)
		}
		if err := writeRelease(dir, req.Artifact, keyHash); err != nil {
			return plugin.TargetResult{}, fmt.Errorf("target %s: %w", t.Host, err)
		}
		if err := writeAtomic(filepath.Join(dir, "slots", slots.candidate), req.Artifact.Version); err != nil {
			return plugin.TargetResult{}, fmt.Errorf("target %s: %w", t.Host, err)
		}
		s.log.Info("candidate deployed", "host", t.Host, "version", req.Artifact.Version, "slot", slots.candidate)
		return plugin.TargetResult{Status: plugin.StatusDeployed, Details: map[string]string{"path": dir, "slot": slots.candidate}}, nil
	})
	return &plugin.Result{Plugin: s.name, Targets: targets}, err
}

// SetCandidateWeight records the share of traffic the candidate slot gets on each target.
func (s *sample) SetCandidateWeight(_ context.Context, req *plugin.Request, weight int) error {
	p, _, err := rolloutCall(req, "SetCandidateWeight", &weight)
	if err != nil {
		return err
	}
	if weight < 0 || weight > 100 {
		return plugin.Errorf(plugin.CodeInvalidArgument, "weight %d: want 0 to 100", weight)
	}
	if weight == p.failWeight {
		return plugin.Permanent(fmt.Errorf("failing at weight %d as param fail_weight asks", weight))
	}
	return eachTarget(p, req, func(_ plugin.Target, dir string) error {
		return writeAtomic(filepath.Join(dir, "weight"), strconv.Itoa(weight))
	})
}

// CandidateWeight reads the weight back; the targets must agree.
func (s *sample) CandidateWeight(_ context.Context, req *plugin.Request) (int, error) {
	p, _, err := rolloutCall(req, "CandidateWeight", nil)
	if err != nil {
		return 0, err
	}
	weight := -1
	err = eachTarget(p, req, func(_ plugin.Target, dir string) error {
		raw, err := readTrimmed(filepath.Join(dir, "weight"))
		if err != nil {
			return err
		}
		w := 0
		if raw != "" {
			if w, err = strconv.Atoi(raw); err != nil {
				return fmt.Errorf("weight file holds %q", raw)
			}
		}
		if weight >= 0 && w != weight {
			return fmt.Errorf("weight %d, but the targets before it have %d", w, weight)
		}
		weight = w
		return nil
	})
	if weight < 0 {
		weight = 0
	}
	return weight, err
}

// ScaleCandidate sizes the candidate slot for its weight: ceil(replicas × weight / 100).
func (s *sample) ScaleCandidate(_ context.Context, req *plugin.Request, weight int) error {
	p, _, err := rolloutCall(req, "ScaleCandidate", &weight)
	if err != nil {
		return err
	}
	if weight < 0 || weight > 100 {
		return plugin.Errorf(plugin.CodeInvalidArgument, "weight %d: want 0 to 100", weight)
	}
	n := (p.replicas*weight + 99) / 100
	return eachTarget(p, req, func(_ plugin.Target, dir string) error {
		return writeAtomic(filepath.Join(dir, "replicas"), strconv.Itoa(n))
	})
}

// RouteTesters sends requests carrying the tester header to the candidate slot.
func (s *sample) RouteTesters(_ context.Context, req *plugin.Request) (map[string]string, error) {
	p, slots, err := rolloutCall(req, "RouteTesters", nil)
	if err != nil {
		return nil, err
	}
	err = eachTarget(p, req, func(_ plugin.Target, dir string) error {
		return writeAtomic(filepath.Join(dir, "testers"), slots.candidate)
	})
	if err != nil {
		return nil, err
	}
	return map[string]string{"slot": slots.candidate, "header": "X-Manent-Slot: " + slots.candidate}, nil
}

// PromoteCandidate makes the candidate slot the live one: it serves all traffic and is current.
func (s *sample) PromoteCandidate(_ context.Context, req *plugin.Request) error {
	p, slots, err := rolloutCall(req, "PromoteCandidate", nil)
	if err != nil {
		return err
	}
	return eachTarget(p, req, func(_ plugin.Target, dir string) error {
		version, err := readTrimmed(filepath.Join(dir, "slots", slots.candidate))
		if err != nil {
			return err
		}
		if version == "" {
			return plugin.Errorf(plugin.CodeFailedPrecondition, "no candidate in slot %s to promote", slots.candidate)
		}
		if err := writeAtomic(filepath.Join(dir, "live-slot"), slots.candidate); err != nil {
			return err
		}
		if err := setCurrent(dir, version); err != nil {
			return err
		}
		return removeAll(filepath.Join(dir, "weight"), filepath.Join(dir, "testers"))
	})
}

// RevertCandidate empties the candidate slot; the live slot, which never stopped serving, stays.
func (s *sample) RevertCandidate(_ context.Context, req *plugin.Request) error {
	p, slots, err := rolloutCall(req, "RevertCandidate", nil)
	if err != nil {
		return err
	}
	return eachTarget(p, req, func(_ plugin.Target, dir string) error {
		live, err := readTrimmed(filepath.Join(dir, "live-slot"))
		if err != nil {
			return err
		}
		if live == slots.candidate {
			return plugin.Errorf(plugin.CodeFailedPrecondition, "slot %s was already promoted", slots.candidate)
		}
		return removeAll(filepath.Join(dir, "slots", slots.candidate), filepath.Join(dir, "weight"),
			filepath.Join(dir, "testers"), filepath.Join(dir, "replicas"))
	})
}

// RetirePrevious empties the slot that served before the promotion.
func (s *sample) RetirePrevious(_ context.Context, req *plugin.Request) error {
	p, slots, err := rolloutCall(req, "RetirePrevious", nil)
	if err != nil {
		return err
	}
	return eachTarget(p, req, func(_ plugin.Target, dir string) error {
		live, err := readTrimmed(filepath.Join(dir, "live-slot"))
		if err != nil {
			return err
		}
		if live != slots.candidate {
			return plugin.Errorf(plugin.CodeFailedPrecondition, "slot %s still serves: promote the candidate first", slots.live)
		}
		return removeAll(filepath.Join(dir, "slots", slots.live), filepath.Join(dir, "replicas"))
	})
}
