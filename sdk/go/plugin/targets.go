package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// TargetFunc works on one target. The returned result's Host defaults to the target's ID and its
// Status to StatusDeployed; on error the target is reported failed with the error's message.
// It runs on several goroutines at once when Request.Parallelism > 1.
type TargetFunc func(ctx context.Context, t Target) (TargetResult, error)

// ForEachTarget runs fn on each target, req.Parallelism at a time. After the first error no
// further target is started; the running ones finish. Results keep the order of req.Targets,
// targets never started are reported as skipped, and each started target's time is measured.
// The error is nil when every target succeeded.
func ForEachTarget(ctx context.Context, req *Request, fn TargetFunc) ([]TargetResult, error) {
	return runTargets(ctx, req, fn, true)
}

// ForAllTargets is ForEachTarget without the stop: every target runs whatever fails (a
// rollback, a dry-run).
func ForAllTargets(ctx context.Context, req *Request, fn TargetFunc) ([]TargetResult, error) {
	return runTargets(ctx, req, fn, false)
}

func runTargets(ctx context.Context, req *Request, fn TargetFunc, stopOnError bool) ([]TargetResult, error) {
	targets := req.Targets
	results := make([]TargetResult, len(targets))
	errs := make([]error, len(targets))
	started := make([]bool, len(targets))

	var mu sync.Mutex // guards next and stopped
	next, stopped := 0, false
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil || next >= len(targets) {
			return 0, false
		}
		i := next
		next++
		started[i] = true
		return i, true
	}

	width := max(1, min(req.Parallelism, len(targets)))
	var wg sync.WaitGroup
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				t := targets[i]
				begin := time.Now()
				r, err := callTarget(ctx, fn, t)
				r.DurationMS = time.Since(begin).Milliseconds()
				if r.Host == "" {
					r.Host = t.ID()
				}
				if err != nil {
					r.Status, r.Error = StatusFailed, err.Error()
					errs[i] = err
					if stopOnError {
						mu.Lock()
						stopped = true
						mu.Unlock()
					}
				} else if r.Status == "" {
					r.Status = StatusDeployed
				}
				results[i] = r
				if req.Progress != nil {
					req.Progress(r)
				}
			}
		}()
	}
	wg.Wait()

	var failed []error
	skipped := false
	for i, t := range targets {
		if !started[i] {
			results[i] = TargetResult{Host: t.ID(), Status: StatusSkipped}
			skipped = true
		}
		if errs[i] != nil {
			failed = append(failed, errs[i])
		}
	}
	if len(failed) == 0 && skipped && ctx.Err() != nil {
		return results, &Error{Code: CodeOf(ctx.Err()), Message: "deploy cancelled before every target was started", Cause: ctx.Err()}
	}
	return results, combine(failed)
}

// callTarget turns a panic in fn into that target's failure, so one bad target cannot take down
// the plugin process and the other targets' results.
func callTarget(ctx context.Context, fn TargetFunc, t Target) (r TargetResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = TargetResult{}, &Error{Code: CodeInternal, Message: fmt.Sprintf("target %s: panic: %v", t.ID(), p)}
		}
	}()
	return fn(ctx, t)
}

// combine makes one error of several failed targets' (in target order): permanent only if
// every failure is, so one transient failure keeps the step retryable.
func combine(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	code := CodeUnavailable
	allPermanent := true
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
		allPermanent = allPermanent && IsPermanent(e)
	}
	if allPermanent {
		code = CodeOf(errs[0])
	}
	return &Error{Code: code, Message: fmt.Sprintf("%d targets failed: %s", len(errs), strings.Join(msgs, "; "))}
}
