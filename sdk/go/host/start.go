// Package host starts and calls external manent plugins from Go, with hashicorp/go-plugin's own
// client. manent's engine is TypeScript; this package serves the Go interop tools and benchmarks
// (cmd/manent-gohost, bench/gohost) and lets the SDK's tests call a plugin the way a host does.
package host

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/manent-deployer/manent/sdk/go/external"
)

// Config says how to start a plugin process.
type Config struct {
	Command string
	Args    []string
	// Env is added to the process's clean environment, as "KEY=value".
	Env []string
	// Dir is the process's working directory; "" is the host's.
	Dir string
	// StartTimeout bounds startup and handshake; 0 means one minute.
	StartTimeout time.Duration
	// Logger receives the plugin's log lines (parsed from its hclog JSON stderr) and go-plugin's
	// own; nil discards them.
	Logger hclog.Logger
}

// Plugin is a started plugin process and its Deployer client.
type Plugin struct {
	client *goplugin.Client
	*Remote
}

// inheritedEnv are the only host variables a plugin receives: the host's environment may hold
// secrets (see external-plugins.md, "Process environment").
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG"}

// Start runs the plugin binary, does the go-plugin handshake (gRPC only, AutoMTLS) and returns
// the client of its Deployer service. Configure is the caller's first call.
func Start(cfg Config) (*Plugin, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, cfg.Env...)
	log := cfg.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  external.Handshake,
		Plugins:          PluginSet(),
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     cfg.StartTimeout,
		Logger:           log,
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("starting plugin %s: %w", cfg.Command, err)
	}
	raw, err := rpc.Dispense(external.PluginName)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("plugin %s: dispensing %q: %w", cfg.Command, external.PluginName, err)
	}
	return &Plugin{client: client, Remote: raw.(*Remote)}, nil
}

// Kill ends the plugin process (go-plugin asks it to exit, then kills it) and waits for it.
func (p *Plugin) Kill() { p.client.Kill() }

// Exited tells whether the process has ended.
func (p *Plugin) Exited() bool { return p.client.Exited() }
