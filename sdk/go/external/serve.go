package external

import (
	"context"
	"errors"
	"log/slog"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// Serve runs factory's deployer as an external plugin and returns when the host ends the
// process. The deployer is built at the host's Configure call, with the plugin's manent.yml
// section and Logger(). stdout belongs to the go-plugin handshake: never write to it.
func Serve(factory plugin.Factory) {
	log := Logger()
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{PluginName: &GRPCPlugin{Factory: factory, Log: log}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		// go-plugin's own lines in the same JSON stream; at info it stays quiet on success.
		Logger: hcLogger().Named("go-plugin"),
	})
}

// GRPCPlugin is the go-plugin definition of the manent Deployer service, plugin side: it
// registers the Deployer server backed by Factory. Hosts use package host instead.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Factory plugin.Factory
	// Log is the logger the Factory receives; nil means Logger().
	Log *slog.Logger
}

// GRPCServer registers the Deployer service on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(broker *goplugin.GRPCBroker, s *grpc.Server) error {
	log := p.Log
	if log == nil {
		log = Logger()
	}
	pb.RegisterDeployerServer(s, newServer(p.Factory, log, broker))
	return nil
}

// GRPCClient is the host side, which a plugin process does not have.
func (p *GRPCPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("external.GRPCPlugin is the plugin side; hosts use package host")
}
