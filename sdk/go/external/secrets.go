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

// secretsSession is the host's Secrets session (docs/plugin-protocol.md, section 5): the broker
// id offered at Configure, dialled once right after Configure answers and kept for the process's
// life (grpc-go reconnects to the same address if the connection drops). Each call's lookups name
// the call by the token its request carries. go-plugin consumes a ConnInfo with one Dial and
// forgets it 5 s after it arrives, so the dial starts at once, before the ConnInfo is sent.
type secretsSession struct {
	mu     sync.Mutex
	ready  chan struct{}
	client pb.SecretsClient
	conn   *grpc.ClientConn
	err    error
}

// acceptSession dials the session offered under id in the background and returns it.
func acceptSession(broker *goplugin.GRPCBroker, id uint32) *secretsSession {
	s := &secretsSession{ready: make(chan struct{})}
	go func() {
		defer close(s.ready)
		conn, err := broker.Dial(id)
		if err != nil {
			s.err = plugin.Errorf(plugin.CodeUnavailable, "connecting to the host's Secrets session (broker id %d): %w", id, err)
			return
		}
		conn.Connect() // the TLS handshake now, not at the first lookup
		s.conn, s.client = conn, pb.NewSecretsClient(conn)
	}()
	return s
}

func (s *secretsSession) get(ctx context.Context) (pb.SecretsClient, error) {
	select {
	case <-s.ready:
		return s.client, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *secretsSession) close() {
	go func() {
		<-s.ready
		if s.conn != nil {
			_ = s.conn.Close()
		}
	}()
}

// brokerSecrets reads secrets from the host's Secrets service for the duration of one call: on
// the session with the call's token when the request carries one, else on the call's own broker
// id (dialled on the first lookup: a call that needs no secret opens no connection). Closed when
// the call returns; later lookups fail.
type brokerSecrets struct {
	broker  *goplugin.GRPCBroker
	id      uint32
	token   string
	session *secretsSession

	mu     sync.Mutex
	conn   *grpc.ClientConn
	client pb.SecretsClient
	closed bool
}

func newBrokerSecrets(broker *goplugin.GRPCBroker, id uint32, token string, session *secretsSession) *brokerSecrets {
	return &brokerSecrets{broker: broker, id: id, token: token, session: session}
}

func (s *brokerSecrets) Secret(ctx context.Context, name string) (string, error) {
	client, err := s.dial(ctx)
	if err != nil {
		return "", err
	}
	var trailer metadata.MD
	resp, err := client.Secret(ctx, &pb.SecretRequest{Name: name, CallToken: s.token}, grpc.Trailer(&trailer))
	if err != nil {
		e, _ := FromStatus(err, trailer)
		return "", e
	}
	return resp.GetValue(), nil
}

func (s *brokerSecrets) dial(ctx context.Context) (pb.SecretsClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, plugin.Errorf(plugin.CodeFailedPrecondition, "secrets are readable only while the call that received them runs")
	}
	if s.id == 0 {
		return nil, plugin.Errorf(plugin.CodeFailedPrecondition, "the host serves no secrets for this call")
	}
	if s.token != "" {
		if s.session == nil {
			return nil, plugin.Errorf(plugin.CodeFailedPrecondition, "the call names a Secrets session this plugin did not accept")
		}
		return s.session.get(ctx)
	}
	if s.client == nil {
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
