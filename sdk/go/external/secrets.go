package external

import (
	"context"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// brokerSecrets reads secrets from the Secrets service the host serves on a broker id for the
// duration of one call. It dials on the first lookup (a call that needs no secret opens no
// connection) and is closed when the call returns; later lookups fail.
type brokerSecrets struct {
	broker *goplugin.GRPCBroker
	id     uint32

	mu     sync.Mutex
	conn   *grpc.ClientConn
	client pb.SecretsClient
	closed bool
}

func newBrokerSecrets(broker *goplugin.GRPCBroker, id uint32) *brokerSecrets {
	return &brokerSecrets{broker: broker, id: id}
}

func (s *brokerSecrets) Secret(ctx context.Context, name string) (string, error) {
	client, err := s.dial()
	if err != nil {
		return "", err
	}
	var trailer metadata.MD
	resp, err := client.Secret(ctx, &pb.SecretRequest{Name: name}, grpc.Trailer(&trailer))
	if err != nil {
		e, _ := FromStatus(err, trailer)
		return "", e
	}
	return resp.GetValue(), nil
}

func (s *brokerSecrets) dial() (pb.SecretsClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, plugin.Errorf(plugin.CodeFailedPrecondition, "secrets are readable only while the call that received them runs")
	}
	if s.client == nil {
		if s.id == 0 {
			return nil, plugin.Errorf(plugin.CodeFailedPrecondition, "the host serves no secrets for this call")
		}
		conn, err := s.broker.Dial(s.id)
		if err != nil {
			return nil, plugin.Errorf(plugin.CodeUnavailable, "connecting to the host's secrets service (broker id %d): %w", s.id, err)
		}
		s.conn, s.client = conn, pb.NewSecretsClient(conn)
	}
	return s.client, nil
}

func (s *brokerSecrets) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// noSecrets is what Validate, Supports and the rollout calls get: they run without secrets.
type noSecrets struct{}

func (noSecrets) Secret(context.Context, string) (string, error) {
	return "", plugin.Errorf(plugin.CodeFailedPrecondition, "secrets are not available in this call")
}
