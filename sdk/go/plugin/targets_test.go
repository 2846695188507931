package plugin

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func targetsOf(hosts ...string) []Target {
	out := make([]Target, len(hosts))
	for i, h := range hosts {
		out[i] = Target{Host: h, Labels: map[string]string{}}
	}
	return out
}

func statuses(rs []TargetResult) []Status {
	out := make([]Status, len(rs))
	for i, r := range rs {
		out[i] = r.Status
	}
	return out
}

func equalStatuses(t *testing.T, got []TargetResult, want ...Status) {
	t.Helper()
	s := statuses(got)
	if len(s) != len(want) {
		t.Fatalf("statuses %v, want %v", s, want)
	}
	for i := range s {
		if s[i] != want[i] {
			t.Fatalf("statuses %v, want %v", s, want)
		}
	}
}

// testCtx bounds a test that waits on other goroutines, so a broken rendezvous fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestForEachTargetKeepsOrderAndDefaults(t *testing.T) {
	req := &Request{Targets: targetsOf("a", "b", "c"), Parallelism: 3}
	got, err := ForEachTarget(testCtx(t), req, func(_ context.Context, tg Target) (TargetResult, error) {
		if tg.Host == "b" {
			return TargetResult{Status: StatusUnchanged, Details: map[string]string{"k": "v"}}, nil
		}
		return TargetResult{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range []string{"a", "b", "c"} {
		if got[i].Host != h {
			t.Fatalf("result %d is %q, want %q (order of targets)", i, got[i].Host, h)
		}
	}
	equalStatuses(t, got, StatusDeployed, StatusUnchanged, StatusDeployed)
	if got[1].Details["k"] != "v" {
		t.Fatalf("details lost: %+v", got[1])
	}
}

// Two clusters on one host are two targets: each result names its target by its ID, never by the shared host.
func TestForEachTargetNamesResultsByTargetID(t *testing.T) {
	req := &Request{Targets: []Target{
		{Host: "127.0.0.1", Port: 6443, Name: "kube-a", Labels: map[string]string{}},
		{Host: "127.0.0.1", Port: 6444, Name: "kube-b", Labels: map[string]string{}},
		{Host: "web-1", Labels: map[string]string{}},
	}, Parallelism: 1}
	got, err := ForAllTargets(testCtx(t), req, func(_ context.Context, tg Target) (TargetResult, error) {
		if tg.Port == 6444 {
			return TargetResult{}, errors.New("broken")
		}
		return TargetResult{}, nil
	})
	if err == nil {
		t.Fatal("want the failure of kube-b")
	}
	for i, id := range []string{"kube-a", "kube-b", "web-1"} {
		if got[i].Host != id {
			t.Fatalf("result %d names %q, want %q", i, got[i].Host, id)
		}
	}
	equalStatuses(t, got, StatusDeployed, StatusFailed, StatusDeployed)
	if got[1].Error != "broken" {
		t.Fatalf("kube-b's error is %q", got[1].Error)
	}
}

func TestForEachTargetStopsAfterFirstErrorAndSkipsTheRest(t *testing.T) {
	req := &Request{Targets: targetsOf("a", "b", "c", "d"), Parallelism: 1}
	var calls atomic.Int32
	got, err := ForEachTarget(testCtx(t), req, func(_ context.Context, tg Target) (TargetResult, error) {
		calls.Add(1)
		if tg.Host == "b" {
			return TargetResult{}, errors.New("target b: broken")
		}
		return TargetResult{}, nil
	})
	if err == nil || err.Error() != "target b: broken" {
		t.Fatalf("error %v, want the failed target's", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d targets started, want 2", calls.Load())
	}
	equalStatuses(t, got, StatusDeployed, StatusFailed, StatusSkipped, StatusSkipped)
	if got[1].Error != "target b: broken" || got[2].Host != "c" || got[2].DurationMS != 0 {
		t.Fatalf("results %+v", got)
	}
}

// With two at a time, a failure stops new targets while the running one finishes normally.
func TestForEachTargetLetsRunningTargetsFinish(t *testing.T) {
	ctx := testCtx(t)
	aReported := make(chan struct{})
	bStarted := make(chan struct{})
	req := &Request{Targets: targetsOf("a", "b", "c", "d"), Parallelism: 2}
	req.Progress = func(r TargetResult) {
		if r.Host == "a" {
			close(aReported)
		}
	}
	got, err := ForEachTarget(ctx, req, func(ctx context.Context, tg Target) (TargetResult, error) {
		switch tg.Host {
		case "a":
			select { // fail only once b runs, so both are in flight
			case <-bStarted:
			case <-ctx.Done():
			}
			return TargetResult{}, Permanent(errors.New("a refused"))
		case "b":
			close(bStarted)
			select { // finish only after a's failure was recorded
			case <-aReported:
			case <-ctx.Done():
			}
			return TargetResult{}, nil
		}
		return TargetResult{}, nil
	})
	equalStatuses(t, got, StatusFailed, StatusDeployed, StatusSkipped, StatusSkipped)
	if !IsPermanent(err) {
		t.Fatalf("error %v should stay permanent", err)
	}
}

func TestForEachTargetRunsParallelismAtOnce(t *testing.T) {
	ctx := testCtx(t)
	var running, peak atomic.Int32
	arrived := make(chan struct{}, 3)
	release := make(chan struct{})
	req := &Request{Targets: targetsOf("a", "b", "c", "d", "e", "f"), Parallelism: 3}
	done := make(chan struct{})
	var got []TargetResult
	go func() {
		defer close(done)
		got, _ = ForEachTarget(ctx, req, func(ctx context.Context, _ Target) (TargetResult, error) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			select {
			case arrived <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			running.Add(-1)
			return TargetResult{}, nil
		})
	}()
	for range 3 { // three targets are in flight at the same time…
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatal("three targets never ran at once")
		}
	}
	close(release)
	<-done
	if peak.Load() != 3 { // …and never more
		t.Fatalf("peak concurrency %d, want 3", peak.Load())
	}
	equalStatuses(t, got, StatusDeployed, StatusDeployed, StatusDeployed, StatusDeployed, StatusDeployed, StatusDeployed)
}

func TestForAllTargetsRunsEveryTargetAndCombinesErrors(t *testing.T) {
	req := &Request{Targets: targetsOf("a", "b", "c"), Parallelism: 1}
	got, err := ForAllTargets(testCtx(t), req, func(_ context.Context, tg Target) (TargetResult, error) {
		switch tg.Host {
		case "a":
			return TargetResult{}, Permanent(errors.New("a refused"))
		case "c":
			return TargetResult{}, errors.New("c timed out")
		}
		return TargetResult{Status: StatusRolledBack}, nil
	})
	equalStatuses(t, got, StatusFailed, StatusRolledBack, StatusFailed)
	if err == nil || err.Error() != "2 targets failed: a refused; c timed out" {
		t.Fatalf("error %v", err)
	}
	// One transient failure keeps the whole retryable.
	if CodeOf(err) != CodeUnavailable || IsPermanent(err) {
		t.Fatalf("code %v, want unavailable", CodeOf(err))
	}
}

func TestForAllTargetsAllPermanentStaysPermanent(t *testing.T) {
	req := &Request{Targets: targetsOf("a", "b")}
	_, err := ForAllTargets(testCtx(t), req, func(_ context.Context, tg Target) (TargetResult, error) {
		return TargetResult{}, Permanent(errors.New(tg.Host + " refused"))
	})
	if CodeOf(err) != CodeAborted {
		t.Fatalf("code %v, want aborted", CodeOf(err))
	}
}

func TestForEachTargetMeasuresDuration(t *testing.T) {
	req := &Request{Targets: targetsOf("a")}
	got, err := ForEachTarget(testCtx(t), req, func(context.Context, Target) (TargetResult, error) {
		// Busy-wait rather than sleep: the lower bound holds however slow the machine is.
		for start := time.Now(); time.Since(start) < 5*time.Millisecond; {
			runtime.Gosched()
		}
		return TargetResult{DurationMS: -1}, nil // the SDK's measure wins over the plugin's
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].DurationMS < 5 {
		t.Fatalf("duration %dms, want at least 5", got[0].DurationMS)
	}
}

func TestForEachTargetCancelledSkipsAndReportsCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	req := &Request{Targets: targetsOf("a", "b", "c"), Parallelism: 1}
	got, err := ForEachTarget(ctx, req, func(context.Context, Target) (TargetResult, error) {
		cancel() // the deploy is cancelled while the first target runs
		return TargetResult{}, nil
	})
	equalStatuses(t, got, StatusDeployed, StatusSkipped, StatusSkipped)
	if CodeOf(err) != CodeCanceled {
		t.Fatalf("error %v, want canceled", err)
	}
}

func TestForEachTargetPanicFailsOnlyThatTarget(t *testing.T) {
	req := &Request{Targets: targetsOf("a", "b")}
	got, err := ForAllTargets(testCtx(t), req, func(_ context.Context, tg Target) (TargetResult, error) {
		if tg.Host == "a" {
			panic("boom")
		}
		return TargetResult{}, nil
	})
	equalStatuses(t, got, StatusFailed, StatusDeployed)
	if CodeOf(err) != CodeInternal {
		t.Fatalf("error %v, want internal", err)
	}
}

func TestForEachTargetNoTargets(t *testing.T) {
	got, err := ForEachTarget(testCtx(t), &Request{Parallelism: 4}, func(context.Context, Target) (TargetResult, error) {
		t.Fatal("called without targets")
		return TargetResult{}, nil
	})
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
}
