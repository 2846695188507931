package external

import (
	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// The conversions between the wire messages and the plugin contract. Exported for hosts
// written in Go (package host, the interop and benchmark tools).

// ArtifactFromProto converts a wire artifact (nil gives the zero Artifact).
func ArtifactFromProto(a *pb.Artifact) plugin.Artifact {
	return plugin.Artifact{
		Type: a.GetType(), Name: a.GetName(), Version: a.GetVersion(),
		Source: a.GetSource(), SHA256: a.GetSha256(), Path: a.GetPath(),
	}
}

// ArtifactToProto converts an artifact to its wire form.
func ArtifactToProto(a plugin.Artifact) *pb.Artifact {
	return &pb.Artifact{Type: a.Type, Name: a.Name, Version: a.Version, Source: a.Source, Sha256: a.SHA256, Path: a.Path}
}

// RequestFromProto converts a wire request; Secrets is left to the caller. Parallelism 0 (an
// earlier host) means 1.
func RequestFromProto(r *pb.DeployRequest) *plugin.Request {
	targets := make([]plugin.Target, len(r.GetTargets()))
	for i, t := range r.GetTargets() {
		targets[i] = plugin.Target{Host: t.GetHost(), Port: int(t.GetPort()), Labels: orEmpty(t.GetLabels()), Name: t.GetName()}
	}
	var rollout *plugin.RolloutPlan
	if p := r.GetRollout(); p != nil {
		rollout = &plugin.RolloutPlan{Weights: p.GetWeights(), Testers: p.GetTesters()}
	}
	return &plugin.Request{
		DeploymentID: r.GetDeploymentId(),
		Tenant:       r.GetTenant(),
		Application:  r.GetApplication(),
		Environment:  r.GetEnvironment(),
		Artifact:     ArtifactFromProto(r.GetArtifact()),
		Targets:      targets,
		Params:       orEmpty(r.GetParams()),
		Parallelism:  max(1, int(r.GetParallelism())),
		Traffic:      r.GetTraffic(),
		Rollout:      rollout,
	}
}

// RequestToProto converts a request to its wire form; the broker id is the caller's.
func RequestToProto(r *plugin.Request) *pb.DeployRequest {
	targets := make([]*pb.Target, len(r.Targets))
	for i, t := range r.Targets {
		targets[i] = &pb.Target{Host: t.Host, Port: int32(t.Port), Labels: t.Labels, Name: t.Name}
	}
	var rollout *pb.RolloutPlan
	if r.Rollout != nil {
		rollout = &pb.RolloutPlan{Weights: r.Rollout.Weights, Testers: r.Rollout.Testers}
	}
	return &pb.DeployRequest{
		DeploymentId: r.DeploymentID,
		Tenant:       r.Tenant,
		Application:  r.Application,
		Environment:  r.Environment,
		Artifact:     ArtifactToProto(r.Artifact),
		Targets:      targets,
		Params:       r.Params,
		Parallelism:  int32(r.Parallelism),
		Traffic:      r.Traffic,
		Rollout:      rollout,
	}
}

// ResultToProto converts a result to its wire form (nil gives nil).
func ResultToProto(r *plugin.Result) *pb.DeployResponse {
	if r == nil {
		return nil
	}
	targets := make([]*pb.TargetResult, len(r.Targets))
	for i, t := range r.Targets {
		targets[i] = &pb.TargetResult{
			Host: t.Host, Status: string(t.Status), Details: t.Details, DurationMs: t.DurationMS, Error: t.Error,
		}
	}
	return &pb.DeployResponse{Plugin: r.Plugin, Targets: targets, Details: r.Details}
}

// ResultFromProto converts a wire result (nil gives nil).
func ResultFromProto(r *pb.DeployResponse) *plugin.Result {
	if r == nil {
		return nil
	}
	targets := make([]plugin.TargetResult, len(r.GetTargets()))
	for i, t := range r.GetTargets() {
		targets[i] = plugin.TargetResult{
			Host: t.GetHost(), Status: plugin.Status(t.GetStatus()), Details: nilIfEmpty(t.GetDetails()),
			DurationMS: t.GetDurationMs(), Error: t.GetError(),
		}
	}
	return &plugin.Result{Plugin: r.GetPlugin(), Targets: targets, Details: nilIfEmpty(r.GetDetails())}
}

// ReleasesToProto converts target releases to their wire form.
func ReleasesToProto(rs []plugin.TargetRelease) []*pb.TargetRelease {
	out := make([]*pb.TargetRelease, len(rs))
	for i, r := range rs {
		out[i] = &pb.TargetRelease{Host: r.Host, Version: r.Version, Details: r.Details}
	}
	return out
}

// ReleasesFromProto converts wire target releases.
func ReleasesFromProto(rs []*pb.TargetRelease) []plugin.TargetRelease {
	out := make([]plugin.TargetRelease, len(rs))
	for i, r := range rs {
		out[i] = plugin.TargetRelease{Host: r.GetHost(), Version: r.GetVersion(), Details: nilIfEmpty(r.GetDetails())}
	}
	return out
}

// DriftsToProto converts target drifts to their wire form.
func DriftsToProto(ds []plugin.TargetDrift) []*pb.TargetDrift {
	out := make([]*pb.TargetDrift, len(ds))
	for i, d := range ds {
		changes := make([]*pb.DriftChange, len(d.Changes))
		for j, c := range d.Changes {
			changes[j] = &pb.DriftChange{Object: c.Object, Field: c.Field, Expected: c.Expected, Live: c.Live}
		}
		out[i] = &pb.TargetDrift{Host: d.Host, Status: d.Status, Version: d.Version, Changes: changes, Details: d.Details}
	}
	return out
}

// DriftsFromProto converts wire target drifts.
func DriftsFromProto(ds []*pb.TargetDrift) []plugin.TargetDrift {
	out := make([]plugin.TargetDrift, len(ds))
	for i, d := range ds {
		changes := make([]plugin.DriftChange, len(d.GetChanges()))
		for j, c := range d.GetChanges() {
			changes[j] = plugin.DriftChange{Object: c.GetObject(), Field: c.GetField(), Expected: c.GetExpected(), Live: c.GetLive()}
		}
		out[i] = plugin.TargetDrift{Host: d.GetHost(), Status: d.GetStatus(), Version: d.GetVersion(), Changes: changes, Details: nilIfEmpty(d.GetDetails())}
	}
	return out
}

// orEmpty gives plugin code a map it can read without nil checks.
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// nilIfEmpty keeps `details` out of JSON when the wire had none, as the TypeScript side does.
func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
