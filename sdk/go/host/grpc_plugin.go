package host

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/manent-deployer/manent/sdk/go/external"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// GRPCPlugin is the go-plugin definition of the manent Deployer service, host side: Dispense
// returns a *Remote.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

// PluginSet is the plugin set a manent host gives go-plugin's client.
func PluginSet() goplugin.PluginSet {
	return goplugin.PluginSet{external.PluginName: &GRPCPlugin{}}
}

// GRPCClient builds the Deployer client on the plugin's connection.
func (GRPCPlugin) GRPCClient(_ context.Context, broker *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &Remote{client: pb.NewDeployerClient(conn), broker: broker}, nil
}

// GRPCServer is the plugin side, which a host does not serve.
func (GRPCPlugin) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("host.GRPCPlugin is the host side; plugins use external.Serve")
}
