package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestPermanent(t *testing.T) {
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) must be nil")
	}
	base := fmt.Errorf("reading plan: %w", fs.ErrNotExist)
	err := Permanent(base)
	if !IsPermanent(err) || CodeOf(err) != CodeAborted {
		t.Fatalf("Permanent gives code %v", CodeOf(err))
	}
	if err.Error() != base.Error() {
		t.Fatalf("message %q changed", err.Error())
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Permanent must keep the wrapped chain")
	}
	// Wrapping a permanent error again keeps the mark.
	if !IsPermanent(fmt.Errorf("target a: %w", err)) {
		t.Fatal("a wrapped permanent error must stay permanent")
	}
}

func TestIsPermanentCodes(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{errors.New("plain"), false},
		{nil, false},
		{Errorf(CodeInvalidArgument, "bad"), true},
		{Errorf(CodeUnimplemented, "no"), true},
		{Errorf(CodeUnavailable, "later"), false},
		{Errorf(CodeNotFound, "missing"), false},
		{context.Canceled, false},
	}
	for _, c := range cases {
		if got := IsPermanent(c.err); got != c.want {
			t.Errorf("IsPermanent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestCodeOfAndNames(t *testing.T) {
	if CodeOf(fmt.Errorf("x: %w", context.DeadlineExceeded)) != CodeDeadlineExceeded {
		t.Fatal("deadline")
	}
	if CodeOf(context.Canceled) != CodeCanceled {
		t.Fatal("canceled")
	}
	if CodeAborted.String() != "aborted" || ParseCode("failed_precondition") != CodeFailedPrecondition || ParseCode("nope") != CodeUnknown {
		t.Fatal("code names")
	}
	e := Errorf(CodeNotFound, "secret %q: %w", "k", fs.ErrNotExist)
	if e.Message != `secret "k": file does not exist` || !errors.Is(e, fs.ErrNotExist) {
		t.Fatalf("Errorf: %q", e.Message)
	}
	withDetails := &Error{Code: CodeInvalidArgument, Message: "m", Details: map[string]string{"field": "base"}}
	if DetailsOf(Permanent(withDetails))["field"] != "base" {
		t.Fatal("Permanent must keep details")
	}
}
