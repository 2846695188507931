package external

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// server is the plugin side of the Deployer service: it builds the deployer at Configure and
// forwards each call to it, translating errors to gRPC statuses with the ErrorTrailer.
type server struct {
	pb.UnimplementedDeployerServer
	factory plugin.Factory
	log     *slog.Logger
	broker  *goplugin.GRPCBroker

	mu       sync.RWMutex
	deployer plugin.Deployer
	session  *secretsSession
}

func newServer(factory plugin.Factory, log *slog.Logger, broker *goplugin.GRPCBroker) *server {
	return &server{factory: factory, log: log, broker: broker}
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	cfg := map[string]any{}
	if raw := req.GetConfigJson(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, toStatus(ctx, plugin.Errorf(plugin.CodeInvalidArgument, "plugin configuration is not a JSON object: %w", err), nil)
		}
	}
	d, err := s.factory(cfg, s.log)
	if err != nil {
		// A Factory error is a bad configuration unless the plugin said otherwise.
		if plugin.CodeOf(err) == plugin.CodeUnknown {
			err = &plugin.Error{Code: plugin.CodeInvalidArgument, Message: err.Error(), Cause: err}
		}
		return nil, toStatus(ctx, err, nil)
	}
	if d == nil {
		return nil, toStatus(ctx, plugin.Errorf(plugin.CodeInternal, "the plugin's Factory returned no deployer"), nil)
	}
	// The Secrets session: one connection for every call's lookups instead of one per call.
	var session *secretsSession
	if id := req.GetSecretsSessionBrokerId(); id != 0 {
		session = acceptSession(s.broker, id)
	}
	s.mu.Lock()
	s.deployer = d
	previous := s.session
	s.session = session
	s.mu.Unlock()
	if previous != nil {
		previous.close()
	}
	return &pb.ConfigureResponse{Name: d.Name(), Capabilities: plugin.CapabilitiesOf(d), SecretsSession: session != nil}, nil
}

// current is the deployer built by the last Configure; every call but Configure needs one.
func (s *server) current() (plugin.Deployer, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.deployer == nil {
		return nil, status.Error(codes.FailedPrecondition, "the plugin is not configured: Configure must be the first call")
	}
	return s.deployer, nil
}

func (s *server) Supports(ctx context.Context, req *pb.SupportsRequest) (*pb.SupportsResponse, error) {
	d, err := s.current()
	if err != nil {
		return nil, err
	}
	return &pb.SupportsResponse{Supported: d.Supports(ArtifactFromProto(req.GetArtifact()))}, nil
}

func (s *server) Validate(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	d, err := s.current()
	if err != nil {
		return nil, err
	}
	r := RequestFromProto(req)
	r.Secrets = noSecrets{}
	if err := d.Validate(ctx, r); err != nil {
		return nil, toStatus(ctx, err, nil)
	}
	return &pb.Empty{}, nil
}

// withRequest runs fn with the converted request and the call's Secrets, closed when fn returns.
func (s *server) withRequest(req *pb.DeployRequest, parallel bool, fn func(*plugin.Request) error) error {
	r := RequestFromProto(req)
	if !parallel {
		r.Parallelism = 1 // a deployer that did not declare parallel_targets always gets 1
	}
	s.mu.RLock()
	session := s.session
	s.mu.RUnlock()
	secrets := newBrokerSecrets(s.broker, req.GetSecretsBrokerId(), req.GetSecretsCallToken(), session)
	defer secrets.close()
	r.Secrets = secrets
	return fn(r)
}

func isParallel(d plugin.Deployer) bool {
	p, ok := d.(plugin.ParallelDeployer)
	return ok && p.ParallelTargets()
}

// resultFn is one result-returning method of the deployer, bound to it.
type resultFn func(ctx context.Context, r *plugin.Request) (*plugin.Result, error)

// resultCall serves the calls that return a Result: pick binds the method, or returns nil when
// the deployer does not implement it (UNIMPLEMENTED). A failure keeps its per-target results.
func (s *server) resultCall(ctx context.Context, req *pb.DeployRequest, what string, pick func(plugin.Deployer) resultFn) (*pb.DeployResponse, error) {
	d, err := s.current()
	if err != nil {
		return nil, err
	}
	fn := pick(d)
	if fn == nil {
		return nil, unimplemented(d, what)
	}
	var res *plugin.Result
	err = s.withRequest(req, isParallel(d), func(r *plugin.Request) error {
		var cerr error
		res, cerr = fn(ctx, r)
		return cerr
	})
	if err != nil {
		return nil, toStatus(ctx, err, res)
	}
	if res == nil {
		return nil, toStatus(ctx, plugin.Errorf(plugin.CodeInternal, "plugin %s returned neither a result nor an error from %s", d.Name(), what), nil)
	}
	return ResultToProto(res), nil
}

func unimplemented(d plugin.Deployer, what string) error {
	return status.Error(codes.Unimplemented, fmt.Sprintf("plugin %s does not implement %s", d.Name(), what))
}

func (s *server) Deploy(ctx context.Context, req *pb.DeployRequest) (*pb.DeployResponse, error) {
	return s.resultCall(ctx, req, "Deploy", func(d plugin.Deployer) resultFn { return d.Deploy })
}

func (s *server) DryRun(ctx context.Context, req *pb.DeployRequest) (*pb.DeployResponse, error) {
	return s.resultCall(ctx, req, "DryRun", func(d plugin.Deployer) resultFn {
		if dr, ok := d.(plugin.DryRunner); ok {
			return dr.DryRun
		}
		return nil
	})
}

func (s *server) DeployCandidate(ctx context.Context, req *pb.DeployRequest) (*pb.DeployResponse, error) {
	return s.resultCall(ctx, req, "DeployCandidate", func(d plugin.Deployer) resultFn {
		if sd, ok := d.(plugin.SlotDeployer); ok {
			return sd.DeployCandidate
		}
		return nil
	})
}

func (s *server) Rollback(ctx context.Context, req *pb.RollbackRequest) (*pb.DeployResponse, error) {
	releases := ReleasesFromProto(req.GetReleases())
	return s.resultCall(ctx, req.GetRequest(), "Rollback", func(d plugin.Deployer) resultFn {
		rb, ok := d.(plugin.Rollbacker)
		if _, inspects := d.(plugin.ReleaseInspector); !ok || !inspects {
			return nil // Rollback counts only with ReleaseInspector, as the capability says
		}
		return func(ctx context.Context, r *plugin.Request) (*plugin.Result, error) {
			return rb.Rollback(ctx, &plugin.RollbackRequest{Request: *r, Releases: releases})
		}
	})
}

func (s *server) CurrentRelease(ctx context.Context, req *pb.DeployRequest) (*pb.CurrentReleaseResponse, error) {
	d, err := s.current()
	if err != nil {
		return nil, err
	}
	ri, ok := d.(plugin.ReleaseInspector)
	if !ok {
		return nil, unimplemented(d, "CurrentRelease")
	}
	var releases []plugin.TargetRelease
	err = s.withRequest(req, isParallel(d), func(r *plugin.Request) error {
		var cerr error
		releases, cerr = ri.CurrentRelease(ctx, r)
		return cerr
	})
	if err != nil {
		return nil, toStatus(ctx, err, nil)
	}
	return &pb.CurrentReleaseResponse{Releases: ReleasesToProto(releases)}, nil
}

// Drift reports what runs on each target (UNIMPLEMENTED without plugin.DriftInspector).
func (s *server) Drift(ctx context.Context, req *pb.DeployRequest) (*pb.DriftResponse, error) {
	d, err := s.current()
	if err != nil {
		return nil, err
	}
	di, ok := d.(plugin.DriftInspector)
	if !ok {
		return nil, unimplemented(d, "Drift")
	}
	var drifts []plugin.TargetDrift
	err = s.withRequest(req, isParallel(d), func(r *plugin.Request) error {
		var cerr error
		drifts, cerr = di.Drift(ctx, r)
		return cerr
	})
	if err != nil {
		return nil, toStatus(ctx, err, nil)
	}
	return &pb.DriftResponse{Targets: DriftsToProto(drifts)}, nil
}

// slotCall serves the percentage-rollout calls that need a capability and return no result.
func slotCall[T any, R any](s *server, ctx context.Context, req *pb.DeployRequest, what string, call func(T, *plugin.Request) (R, error)) (R, error) {
	var zero R
	d, err := s.current()
	if err != nil {
		return zero, err
	}
	impl, ok := d.(T)
	if !ok {
		return zero, unimplemented(d, what)
	}
	var out R
	err = s.withRequest(req, isParallel(d), func(r *plugin.Request) error {
		var cerr error
		out, cerr = call(impl, r)
		return cerr
	})
	if err != nil {
		return zero, toStatus(ctx, err, nil)
	}
	return out, nil
}

func (s *server) PrepareSlots(ctx context.Context, req *pb.DeployRequest) (*pb.StateResponse, error) {
	return slotCall(s, ctx, req, "PrepareSlots", func(d plugin.SlotDeployer, r *plugin.Request) (*pb.StateResponse, error) {
		state, err := d.PrepareSlots(ctx, r)
		return &pb.StateResponse{State: state}, err
	})
}

func (s *server) PromoteCandidate(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	return slotCall(s, ctx, req, "PromoteCandidate", func(d plugin.SlotDeployer, r *plugin.Request) (*pb.Empty, error) {
		return &pb.Empty{}, d.PromoteCandidate(ctx, r)
	})
}

func (s *server) RevertCandidate(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	return slotCall(s, ctx, req, "RevertCandidate", func(d plugin.SlotDeployer, r *plugin.Request) (*pb.Empty, error) {
		return &pb.Empty{}, d.RevertCandidate(ctx, r)
	})
}

func (s *server) RetirePrevious(ctx context.Context, req *pb.DeployRequest) (*pb.Empty, error) {
	return slotCall(s, ctx, req, "RetirePrevious", func(d plugin.SlotDeployer, r *plugin.Request) (*pb.Empty, error) {
		return &pb.Empty{}, d.RetirePrevious(ctx, r)
	})
}

func (s *server) SetCandidateWeight(ctx context.Context, req *pb.WeightRequest) (*pb.Empty, error) {
	return slotCall(s, ctx, req.GetRequest(), "SetCandidateWeight", func(d plugin.TrafficRouter, r *plugin.Request) (*pb.Empty, error) {
		return &pb.Empty{}, d.SetCandidateWeight(ctx, r, int(req.GetWeight()))
	})
}

func (s *server) CandidateWeight(ctx context.Context, req *pb.DeployRequest) (*pb.WeightResponse, error) {
	return slotCall(s, ctx, req, "CandidateWeight", func(d plugin.TrafficRouter, r *plugin.Request) (*pb.WeightResponse, error) {
		w, err := d.CandidateWeight(ctx, r)
		return &pb.WeightResponse{Weight: int32(w)}, err
	})
}

func (s *server) RouteTesters(ctx context.Context, req *pb.DeployRequest) (*pb.DetailsResponse, error) {
	return slotCall(s, ctx, req, "RouteTesters", func(d plugin.TesterRouter, r *plugin.Request) (*pb.DetailsResponse, error) {
		details, err := d.RouteTesters(ctx, r)
		return &pb.DetailsResponse{Details: details}, err
	})
}

func (s *server) ScaleCandidate(ctx context.Context, req *pb.WeightRequest) (*pb.Empty, error) {
	return slotCall(s, ctx, req.GetRequest(), "ScaleCandidate", func(d plugin.SlotScaler, r *plugin.Request) (*pb.Empty, error) {
		return &pb.Empty{}, d.ScaleCandidate(ctx, r, int(req.GetWeight()))
	})
}
