package external

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestSlogWritesHCLogJSON(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(&hclogHandler{log: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info, JSONFormat: true})})

	log.Debug("hidden at info")
	log.With("plugin", "p").WithGroup("target").Warn("slow", "host", "a", slog.Group("net", "port", 22))
	log.Error("failed", "attempt", 2)

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (debug filtered), got:\n%s", out.String())
	}
	var warn, failed map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &warn); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &failed); err != nil {
		t.Fatal(err)
	}
	// The keys go-plugin's host parses: @level, @message, @timestamp; attributes at top level.
	if warn["@level"] != "warn" || warn["@message"] != "slow" || warn["@timestamp"] == nil {
		t.Fatalf("warn line %v", warn)
	}
	if warn["plugin"] != "p" || warn["target.host"] != "a" || warn["target.net.port"] != float64(22) {
		t.Fatalf("attributes not flattened as expected: %v", warn)
	}
	if failed["@level"] != "error" || failed["attempt"] != float64(2) {
		t.Fatalf("error line %v", failed)
	}
}
