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

// PrepareSlots starts a percentage rollout (UNIMPLEMENTED unless the plugin declares slots).
func (r *Remote) PrepareSlots(ctx context.Context, req *plugin.Request) (map[string]string, error) {
	var resp *pb.StateResponse
	var trailer metadata.MD
	err := withSecrets(r.broker, req.Secrets, func(id uint32) error {
		in := external.RequestToProto(req)
		in.SecretsBrokerId = id
		var cerr error
		resp, cerr = r.client.PrepareSlots(ctx, in, grpc.Trailer(&trailer))
		return cerr
	})
	if err != nil {
		e, _ := external.FromStatus(err, trailer)
		return nil, e
	}
	return resp.GetState(), nil
}
