// Package external serves a plugin.Factory as an external manent plugin: a separate process that
// speaks the protocol of proto/deployer.proto through hashicorp/go-plugin (gRPC, AutoMTLS).
package external

import goplugin "github.com/hashicorp/go-plugin"

// The wire conventions shared by every manent host and plugin SDK (Go and TypeScript). Changing
// any of them breaks every plugin built before: an incompatible protocol change increments
// ProtocolVersion instead.
const (
	// ProtocolVersion is the version of proto/deployer.proto's protocol.
	ProtocolVersion = 1
	// MagicCookieKey and MagicCookieValue tell a plugin it was started by a manent host (a
	// binary run by hand exits with a hint instead of waiting for a handshake).
	MagicCookieKey   = "MANENT_PLUGIN"
	MagicCookieValue = "manent-deployer-plugin-6c1e0b"
	// PluginName is the name the Deployer service is dispensed under in the go-plugin set.
	PluginName = "deployer"
	// ErrorTrailer is the gRPC trailer of a failed call that carries a serialized ErrorDetail:
	// the error's code and details, and the per-target results of a failed deploy.
	ErrorTrailer = "manent-error-bin"
)

// Handshake is the go-plugin handshake configuration of the manent protocol.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}
