package host

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// withSecrets serves secrets on a fresh broker id for the duration of call, then stops the
// server: the plugin can read secrets only while the call runs. No accessor means id 0.
func withSecrets(broker *goplugin.GRPCBroker, secrets plugin.Secrets, call func(id uint32) error) error {
	if secrets == nil {
		return call(0)
	}
	id := broker.NextId()
	served := make(chan *grpc.Server, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// AcceptAndServe adds the broker's mTLS credentials to the server options.
		broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(opts...)
			pb.RegisterSecretsServer(s, &secretsServer{secrets: secrets})
			served <- s
			return s
		})
	}()
	err := call(id)
	select {
	case s := <-served:
		s.Stop()
	case <-done: // the broker could not accept (it is closing): nothing to stop
	}
	<-done
	return err
}

type secretsServer struct {
	pb.UnimplementedSecretsServer
	secrets plugin.Secrets
}

// Secret answers a lookup; a failure keeps its code (not_found…) and never the value.
func (s *secretsServer) Secret(ctx context.Context, req *pb.SecretRequest) (*pb.SecretResponse, error) {
	v, err := s.secrets.Secret(ctx, req.GetName())
	if err != nil {
		code := plugin.CodeOf(err)
		if code <= 0 || code > plugin.CodeUnauthenticated {
			code = plugin.CodeUnknown
		}
		return nil, status.Error(codes.Code(code), err.Error())
	}
	return &pb.SecretResponse{Value: v}, nil
}

// StaticSecrets is a Secrets backed by a map; a missing name is not_found.
type StaticSecrets map[string]string

func (m StaticSecrets) Secret(_ context.Context, name string) (string, error) {
	if v, ok := m[name]; ok {
		return v, nil
	}
	return "", plugin.Errorf(plugin.CodeNotFound, "secret %q is not defined", name)
}
