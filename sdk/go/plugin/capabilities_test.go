package plugin

import (
	"context"
	"slices"
	"testing"
)

type base struct{}

func (base) Name() string                                      { return "t" }
func (base) Supports(Artifact) bool                            { return true }
func (base) Validate(context.Context, *Request) error          { return nil }
func (base) Deploy(context.Context, *Request) (*Result, error) { return &Result{}, nil }
func (base) DryRun(context.Context, *Request) (*Result, error) { return &Result{}, nil }

type rollbackOnly struct{ base }

func (rollbackOnly) Rollback(context.Context, *RollbackRequest) (*Result, error) { return nil, nil }

type full struct{ rollbackOnly }

func (full) CurrentRelease(context.Context, *Request) ([]TargetRelease, error) { return nil, nil }
func (full) ParallelTargets() bool                                             { return true }

type serial struct{ base }

func (serial) ParallelTargets() bool { return false }

func TestCapabilitiesOf(t *testing.T) {
	cases := []struct {
		d    Deployer
		want []string
	}{
		{base{}, []string{CapDryRun}},
		// Rollback without ReleaseInspector is not a capability: nothing to roll back to.
		{rollbackOnly{}, []string{CapDryRun}},
		{full{}, []string{CapDryRun, CapCurrentRelease, CapRollback, CapParallelTargets}},
		{serial{}, []string{CapDryRun}},
	}
	for _, c := range cases {
		if got := CapabilitiesOf(c.d); !slices.Equal(got, c.want) {
			t.Errorf("%T: %v, want %v", c.d, got, c.want)
		}
	}
}
