package external

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// LogLevelEnv sets the plugin's log level (trace, debug, info, warn, error); default info.
// Set it through the plugin's `external.env` in manent.yml.
const LogLevelEnv = "MANENT_PLUGIN_LOG_LEVEL"

var (
	loggerOnce sync.Once
	baseLogger hclog.Logger
	slogLogger *slog.Logger
)

// Logger is the plugin's logger: hclog-compatible JSON lines on the process's stderr, which
// the host parses and forwards with their level, message and attributes. It is the logger the
// Factory receives.
//
// The stderr captured is the one the process started with: go-plugin's Serve later replaces
// os.Stderr with a pipe to a separate channel, so direct writes to os.Stderr do not reach the
// host's log.
func Logger() *slog.Logger {
	initLogger()
	return slogLogger
}

func hcLogger() hclog.Logger {
	initLogger()
	return baseLogger
}

func initLogger() {
	loggerOnce.Do(func() {
		level := hclog.LevelFromString(os.Getenv(LogLevelEnv))
		if level == hclog.NoLevel {
			level = hclog.Info
		}
		baseLogger = hclog.New(&hclog.LoggerOptions{
			Output:     os.Stderr,
			Level:      level,
			JSONFormat: true,
		})
		slogLogger = slog.New(&hclogHandler{log: baseLogger})
	})
}

// hclogHandler is a slog.Handler writing through hclog, so plugin code uses the standard
// log/slog API while the output stays in the format go-plugin's host parses.
type hclogHandler struct {
	log    hclog.Logger
	prefix string // the open groups, "a.b."
}

func (h *hclogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return toHCLevel(l) >= h.log.GetLevel()
}

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := make([]any, 0, 2*r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		args = appendAttr(args, h.prefix, a)
		return true
	})
	h.log.Log(toHCLevel(r.Level), r.Message, args...)
	return nil
}

func (h *hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	args := make([]any, 0, 2*len(attrs))
	for _, a := range attrs {
		args = appendAttr(args, h.prefix, a)
	}
	return &hclogHandler{log: h.log.With(args...), prefix: h.prefix}
}

func (h *hclogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &hclogHandler{log: h.log, prefix: h.prefix + name + "."}
}

// appendAttr flattens groups into dotted keys: hclog's JSON has one level of attributes.
func appendAttr(args []any, prefix string, a slog.Attr) []any {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, g := range v.Group() {
			args = appendAttr(args, p, g)
		}
		return args
	}
	if a.Key == "" {
		return args
	}
	return append(args, prefix+a.Key, v.Any())
}

func toHCLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	default:
		return hclog.Error
	}
}
