package host_test

import (
	"context"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/manent-deployer/manent/sdk/go/external"
	"github.com/manent-deployer/manent/sdk/go/host"
	"github.com/manent-deployer/manent/sdk/go/plugin"
)

// bothSides joins the plugin side (external) and the host side (host) of the Deployer service,
// for go-plugin's in-process test connection, which uses one plugin set for both.
type bothSides struct {
	goplugin.NetRPCUnsupportedPlugin
	server *external.GRPCPlugin
}

func (b bothSides) GRPCServer(br *goplugin.GRPCBroker, s *grpc.Server) error {
	return b.server.GRPCServer(br, s)
}

func (b bothSides) GRPCClient(ctx context.Context, br *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return host.GRPCPlugin{}.GRPCClient(ctx, br, c)
}

// connect serves probe through go-plugin's real gRPC server and broker, in process.
func connect(t *testing.T) *host.Remote {
	t.Helper()
	set := goplugin.PluginSet{external.PluginName: bothSides{server: &external.GRPCPlugin{Factory: probeFactory}}}
	client, _ := goplugin.TestPluginGRPCConn(t, false, set)
	// Close asks the server to stop through go-plugin's controller service, as a real host does
	// (stopping it here as well would race with that).
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(external.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*host.Remote)
}

func request(params map[string]string, secrets plugin.Secrets, hosts ...string) *plugin.Request {
	targets := make([]plugin.Target, len(hosts))
	for i, h := range hosts {
		targets[i] = plugin.Target{Host: h, Labels: map[string]string{}}
	}
	return &plugin.Request{
		DeploymentID: "d1", Tenant: "t", Application: "app", Environment: "env",
		Artifact: plugin.Artifact{Type: "file", Name: "app", Version: "1.0.0", Source: "/dev/null"},
		Targets:  targets, Params: params, Secrets: secrets, Parallelism: 4,
	}
}

func TestInProcessCallBeforeConfigureFails(t *testing.T) {
	d := connect(t)
	_, err := d.Deploy(context.Background(), request(nil, nil, "a"))
	if plugin.CodeOf(err) != plugin.CodeFailedPrecondition {
		t.Fatalf("error %v, want failed_precondition", err)
	}
}

func TestInProcessConfigureFactoryErrorIsInvalidArgument(t *testing.T) {
	d := connect(t)
	_, _, err := d.Configure(context.Background(), map[string]any{"broken": true})
	if plugin.CodeOf(err) != plugin.CodeInvalidArgument || err.Error() != "config field broken: the probe refuses it" {
		t.Fatalf("error %v (%v)", err, plugin.CodeOf(err))
	}
}

func TestInProcessProtocol(t *testing.T) {
	ctx := context.Background()
	d := connect(t)
	name, caps, err := d.Configure(ctx, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if name != "probe" || len(caps) != 1 || caps[0] != plugin.CapParallelTargets {
		t.Fatalf("configure: %q %v", name, caps)
	}
	if ok, err := d.Supports(ctx, plugin.Artifact{Type: "file"}); !ok || err != nil {
		t.Fatalf("supports: %v %v", ok, err)
	}

	t.Run("validate gets no secrets and errors keep their details", func(t *testing.T) {
		if err := d.Validate(ctx, request(nil, host.StaticSecrets{"token": "x"}, "a")); err != nil {
			t.Fatal(err)
		}
		err := d.Validate(ctx, request(map[string]string{"mode": "invalid"}, nil, "a"))
		if plugin.CodeOf(err) != plugin.CodeInvalidArgument || plugin.DetailsOf(err)["field"] != "mode" {
			t.Fatalf("error %v, details %v", err, plugin.DetailsOf(err))
		}
	})

	t.Run("deploy reads a secret through the broker", func(t *testing.T) {
		res, err := d.Deploy(ctx, request(nil, host.StaticSecrets{"token": "12345"}, "a", "b"))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Targets) != 2 || res.Targets[1].Host != "b" || res.Targets[1].Status != plugin.StatusDeployed ||
			res.Targets[0].Details["token_len"] != "5" || res.Details["parallelism"] != "4" {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("secrets die with the call", func(t *testing.T) {
		_, err := d.Deploy(ctx, request(map[string]string{"mode": "stale"}, host.StaticSecrets{}, "a"))
		if plugin.CodeOf(err) != plugin.CodeFailedPrecondition {
			t.Fatalf("error %v (%v), want failed_precondition", err, plugin.CodeOf(err))
		}
	})

	t.Run("a missing secret keeps not_found", func(t *testing.T) {
		_, err := d.Deploy(ctx, request(nil, host.StaticSecrets{}, "a"))
		if plugin.CodeOf(err) != plugin.CodeNotFound {
			t.Fatalf("error %v (%v), want not_found", err, plugin.CodeOf(err))
		}
	})

	t.Run("no accessor means broker id 0 and no secrets", func(t *testing.T) {
		_, err := d.Deploy(ctx, request(nil, nil, "a"))
		if plugin.CodeOf(err) != plugin.CodeFailedPrecondition {
			t.Fatalf("error %v (%v)", err, plugin.CodeOf(err))
		}
	})

	t.Run("permanent crosses as aborted", func(t *testing.T) {
		_, err := d.Deploy(ctx, request(map[string]string{"mode": "permanent"}, host.StaticSecrets{"token": "x"}, "a"))
		if plugin.CodeOf(err) != plugin.CodeAborted || !plugin.IsPermanent(err) {
			t.Fatalf("error %v (%v)", err, plugin.CodeOf(err))
		}
	})

	t.Run("a failed deploy keeps its per-target results", func(t *testing.T) {
		req := request(map[string]string{"fail_host": "b"}, host.StaticSecrets{"token": "x"}, "a", "b", "c")
		req.Parallelism = 1
		res, err := d.Deploy(ctx, req)
		if plugin.CodeOf(err) != plugin.CodeAborted || err.Error() != "target b: refused" {
			t.Fatalf("error %v (%v)", err, plugin.CodeOf(err))
		}
		if res == nil || len(res.Targets) != 3 {
			t.Fatalf("partial result %+v", res)
		}
		got := []plugin.Status{res.Targets[0].Status, res.Targets[1].Status, res.Targets[2].Status}
		if got[0] != plugin.StatusDeployed || got[1] != plugin.StatusFailed || got[2] != plugin.StatusSkipped || res.Targets[1].Error != "target b: refused" {
			t.Fatalf("partial statuses %v", got)
		}
	})

	t.Run("calls the deployer lacks are unimplemented", func(t *testing.T) {
		for name, call := range map[string]func() error{
			"DryRun":         func() error { _, err := d.DryRun(ctx, request(nil, nil, "a")); return err },
			"CurrentRelease": func() error { _, err := d.CurrentRelease(ctx, request(nil, nil, "a")); return err },
			"Rollback": func() error {
				_, err := d.Rollback(ctx, &plugin.RollbackRequest{Request: *request(nil, nil, "a")})
				return err
			},
			"PrepareSlots": func() error { _, err := d.PrepareSlots(ctx, request(nil, nil, "a")); return err },
			"Drift":        func() error { _, err := d.Drift(ctx, request(nil, nil, "a")); return err },
		} {
			if err := call(); plugin.CodeOf(err) != plugin.CodeUnimplemented {
				t.Errorf("%s: error %v, want unimplemented", name, err)
			}
		}
	})
}

func TestInProcessCancellationReachesThePlugin(t *testing.T) {
	d := connect(t)
	if _, _, err := d.Configure(context.Background(), map[string]any{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := d.Deploy(ctx, request(map[string]string{"mode": "block"}, host.StaticSecrets{}, "a"))
		done <- err
	}()
	<-blocked.started
	cancel()
	if err := <-blocked.ended; err != context.Canceled {
		t.Fatalf("the plugin's context ended with %v, want context.Canceled", err)
	}
	if err := <-done; plugin.CodeOf(err) != plugin.CodeCanceled {
		t.Fatalf("the host's call ended with %v (%v), want canceled", err, plugin.CodeOf(err))
	}
}

func TestInProcessSerialDeployerGetsParallelismOne(t *testing.T) {
	d := connect(t)
	_, caps, err := d.Configure(context.Background(), map[string]any{"serial": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 0 {
		t.Fatalf("capabilities %v, want none", caps)
	}
	res, err := d.Deploy(context.Background(), request(nil, host.StaticSecrets{"token": "x"}, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Details["parallelism"] != "1" {
		t.Fatalf("a deployer without parallel_targets got parallelism %s", res.Details["parallelism"])
	}
}

func TestInProcessDrift(t *testing.T) {
	ctx := context.Background()
	d := connect(t)
	_, caps, err := d.Configure(ctx, map[string]any{"drift": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 2 || caps[0] != plugin.CapParallelTargets || caps[1] != plugin.CapDrift {
		t.Fatalf("capabilities %v, want parallel_targets and drift", caps)
	}
	req := request(nil, host.StaticSecrets{"token": "x"}, "a", "b")
	req.Targets[0].Labels["runs"] = "1.0.0"
	req.Targets[1].Labels["runs"] = "0.9.0"
	got, err := d.Drift(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Host != "a" || got[0].Status != plugin.DriftInSync || len(got[0].Changes) != 0 {
		t.Fatalf("target a: %+v", got)
	}
	want := plugin.DriftChange{Object: "release", Field: "version", Expected: "1.0.0", Live: "0.9.0"}
	if got[1].Status != plugin.DriftDrifted || got[1].Version != "0.9.0" || len(got[1].Changes) != 1 || got[1].Changes[0] != want {
		t.Fatalf("target b: %+v", got[1])
	}
	// The Secrets service is served for the call: without the secret the plugin's error comes back.
	if _, err := d.Drift(ctx, request(nil, host.StaticSecrets{}, "a")); err == nil {
		t.Fatal("a drift call without its secret succeeded")
	}
}
