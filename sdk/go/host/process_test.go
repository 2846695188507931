package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/manent-deployer/manent/sdk/go/external"
	"github.com/manent-deployer/manent/sdk/go/host"
	"github.com/manent-deployer/manent/sdk/go/plugin"
)

// asPlugin makes the test binary itself the plugin process: the process tests start it again
// with this variable set, and external.Serve runs instead of the tests.
const asPlugin = "MANENT_SDK_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPlugin) == "1" {
		external.Serve(probeFactory)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syncBuffer collects the host logger's output, written from go-plugin's stderr reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A real process, real go-plugin client: handshake, AutoMTLS, the broker under mTLS, and the
// plugin's logs forwarded to the host's logger with their attributes.
func TestProcessServe(t *testing.T) {
	logs := &syncBuffer{}
	p, err := host.Start(host.Config{
		Command:      os.Args[0],
		Env:          []string{asPlugin + "=1"},
		StartTimeout: 30 * time.Second,
		Logger:       hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info, JSONFormat: true}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()

	ctx := context.Background()
	name, caps, err := p.Configure(ctx, map[string]any{})
	if err != nil || name != "probe" || len(caps) != 1 {
		t.Fatalf("configure: %q %v %v", name, caps, err)
	}
	req := request(nil, host.StaticSecrets{"token": "abc"}, "a", "b")
	req.DeploymentID = "dep-logged"
	res, err := p.Deploy(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Targets[0].Details["token_len"] != "3" || res.Targets[1].Status != plugin.StatusDeployed {
		t.Fatalf("result %+v", res)
	}
	_, err = p.Deploy(ctx, request(map[string]string{"mode": "permanent"}, nil, "a"))
	if plugin.CodeOf(err) != plugin.CodeAborted {
		t.Fatalf("error %v, want aborted", err)
	}

	p.Kill() // waits for the process and for its stderr to be read
	if !p.Exited() {
		t.Fatal("the plugin process is still running after Kill")
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["@message"] == "deploying" {
			found = entry["deployment"] == "dep-logged" && entry["@level"] == "info"
		}
	}
	if !found {
		t.Fatalf("the plugin's log line did not reach the host logger with its attributes:\n%s", logs.String())
	}
}

// A plugin binary run by hand (no magic cookie) says so and exits instead of waiting.
func TestProcessWithoutCookieExits(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{asPlugin + "=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("run without cookie: %v", err)
	}
	if !strings.Contains(stderr.String(), "plugin") {
		t.Fatalf("stderr %q does not explain", stderr.String())
	}
}
