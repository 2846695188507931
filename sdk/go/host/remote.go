package host

import (
	"context"
	"encoding/json"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/manent-deployer/manent/sdk/go/external"
	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// Remote calls a plugin's Deployer service. Errors are *plugin.Error with the wire code and,
// from the manent-error-bin trailer, the details; a failed result call also returns the
// per-target results the plugin reported with the failure.
type Remote struct {
	client pb.DeployerClient
	broker *goplugin.GRPCBroker
}

// Configure sends the plugin's configuration; it answers with its name and capabilities.
func (r *Remote) Configure(ctx context.Context, cfg map[string]any) (string, []string, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", nil, plugin.Errorf(plugin.CodeInvalidArgument, "plugin configuration is not JSON-encodable: %w", err)
	}
	var trailer metadata.MD
	resp, err := r.client.Configure(ctx, &pb.ConfigureRequest{ConfigJson: raw}, grpc.Trailer(&trailer))
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		return "", nil, e
	}
	return resp.GetName(), resp.GetCapabilities(), nil
}

// Supports asks whether the plugin can deploy the artifact.
func (r *Remote) Supports(ctx context.Context, a plugin.Artifact) (bool, error) {
	var trailer metadata.MD
	resp, err := r.client.Supports(ctx, &pb.SupportsRequest{Artifact: external.ArtifactToProto(a)}, grpc.Trailer(&trailer))
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		return false, e
	}
	return resp.GetSupported(), nil
}

// Validate checks the request; the plugin gets no secrets.
func (r *Remote) Validate(ctx context.Context, req *plugin.Request) error {
	var trailer metadata.MD
	_, err := r.client.Validate(ctx, external.RequestToProto(req), grpc.Trailer(&trailer))
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		return e
	}
	return nil
}

// Deploy runs the deploy; req.Secrets is served to the plugin for the duration of the call.
func (r *Remote) Deploy(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	return r.resultCall(ctx, req, r.client.Deploy)
}

// DryRun runs the dry-run (UNIMPLEMENTED when the plugin has none).
func (r *Remote) DryRun(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	return r.resultCall(ctx, req, r.client.DryRun)
}

// Rollback returns the targets to req.Releases.
func (r *Remote) Rollback(ctx context.Context, req *plugin.RollbackRequest) (*plugin.Result, error) {
	return r.resultCall(ctx, &req.Request, func(ctx context.Context, in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.DeployResponse, error) {
		return r.client.Rollback(ctx, &pb.RollbackRequest{Request: in, Releases: external.ReleasesToProto(req.Releases)}, opts...)
	})
}

// CurrentRelease asks what each target runs now.
func (r *Remote) CurrentRelease(ctx context.Context, req *plugin.Request) ([]plugin.TargetRelease, error) {
	var resp *pb.CurrentReleaseResponse
	var trailer metadata.MD
	err := withSecrets(r.broker, req.Secrets, func(id uint32) error {
		in := external.RequestToProto(req)
		in.SecretsBrokerId = id
		var cerr error
		resp, cerr = r.client.CurrentRelease(ctx, in, grpc.Trailer(&trailer))
		return cerr
	})
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		return nil, e
	}
	return external.ReleasesFromProto(resp.GetReleases()), nil
}

// Drift asks what runs on each target and whether it still matches req.Artifact.Version.
func (r *Remote) Drift(ctx context.Context, req *plugin.Request) ([]plugin.TargetDrift, error) {
	var resp *pb.DriftResponse
	var trailer metadata.MD
	err := withSecrets(r.broker, req.Secrets, func(id uint32) error {
		in := external.RequestToProto(req)
		in.SecretsBrokerId = id
		var cerr error
		resp, cerr = r.client.Drift(ctx, in, grpc.Trailer(&trailer))
		return cerr
	})
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		return nil, e
	}
	return external.DriftsFromProto(resp.GetTargets()), nil
}

type resultRPC func(ctx context.Context, in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.DeployResponse, error)

func (r *Remote) resultCall(ctx context.Context, req *plugin.Request, call resultRPC) (*plugin.Result, error) {
	var resp *pb.DeployResponse
	var trailer metadata.MD
	err := withSecrets(r.broker, req.Secrets, func(id uint32) error {
		in := external.RequestToProto(req)
		in.SecretsBrokerId = id
		var cerr error
		resp, cerr = call(ctx, in, grpc.Trailer(&trailer))
		return cerr
	})
	if err != nil {
		e, partial := external.FromStatus(err, trailer)
		return partial, e
	}
	return external.ResultFromProto(resp), nil
}

// withDeployContext runs a call that has the deploy context: req.Secrets is served to the plugin
// through the broker for the call's duration, as for Deploy. The percentage-rollout calls act on
// targets too (DeployCandidate writes a release, a router may need its API token), so they get it.
func withDeployContext[T any](r *Remote, ctx context.Context, req *plugin.Request, call func(in *pb.DeployRequest, opts ...grpc.CallOption) (T, error)) (T, error) {
	var resp T
	var trailer metadata.MD
	err := withSecrets(r.broker, req.Secrets, func(id uint32) error {
		in := external.RequestToProto(req)
		in.SecretsBrokerId = id
		var cerr error
		resp, cerr = call(in, grpc.Trailer(&trailer))
		return cerr
	})
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		var zero T
		return zero, e
	}
	return resp, nil
}

// PrepareSlots starts a percentage rollout (UNIMPLEMENTED unless the plugin declares slots); the
// state it returns goes in Request.Traffic of every later call.
func (r *Remote) PrepareSlots(ctx context.Context, req *plugin.Request) (map[string]string, error) {
	resp, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.StateResponse, error) {
		return r.client.PrepareSlots(ctx, in, opts...)
	})
	return resp.GetState(), err
}

// DeployCandidate deploys the release into the candidate slot, beside the live one.
func (r *Remote) DeployCandidate(ctx context.Context, req *plugin.Request) (*plugin.Result, error) {
	return r.resultCall(ctx, req, r.client.DeployCandidate)
}

// PromoteCandidate makes the candidate the live release.
func (r *Remote) PromoteCandidate(ctx context.Context, req *plugin.Request) error {
	_, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.Empty, error) {
		return r.client.PromoteCandidate(ctx, in, opts...)
	})
	return err
}

// RevertCandidate removes the candidate; the live release keeps serving.
func (r *Remote) RevertCandidate(ctx context.Context, req *plugin.Request) error {
	_, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.Empty, error) {
		return r.client.RevertCandidate(ctx, in, opts...)
	})
	return err
}

// RetirePrevious removes the release that served before the promotion.
func (r *Remote) RetirePrevious(ctx context.Context, req *plugin.Request) error {
	_, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.Empty, error) {
		return r.client.RetirePrevious(ctx, in, opts...)
	})
	return err
}

// SetCandidateWeight sends weight percent of the traffic (0–100) to the candidate.
func (r *Remote) SetCandidateWeight(ctx context.Context, req *plugin.Request, weight int) error {
	_, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.Empty, error) {
		return r.client.SetCandidateWeight(ctx, &pb.WeightRequest{Request: in, Weight: int32(weight)}, opts...)
	})
	return err
}

// CandidateWeight asks the candidate's current weight.
func (r *Remote) CandidateWeight(ctx context.Context, req *plugin.Request) (int, error) {
	resp, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.WeightResponse, error) {
		return r.client.CandidateWeight(ctx, in, opts...)
	})
	return int(resp.GetWeight()), err
}

// RouteTesters routes testers to the candidate; the details say how (shown to the user).
func (r *Remote) RouteTesters(ctx context.Context, req *plugin.Request) (map[string]string, error) {
	resp, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.DetailsResponse, error) {
		return r.client.RouteTesters(ctx, in, opts...)
	})
	return resp.GetDetails(), err
}

// ScaleCandidate sizes the candidate for weight percent of the traffic.
func (r *Remote) ScaleCandidate(ctx context.Context, req *plugin.Request, weight int) error {
	_, err := withDeployContext(r, ctx, req, func(in *pb.DeployRequest, opts ...grpc.CallOption) (*pb.Empty, error) {
		return r.client.ScaleCandidate(ctx, &pb.WeightRequest{Request: in, Weight: int32(weight)}, opts...)
	})
	return err
}
