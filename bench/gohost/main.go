// Command gohost is the external-plugin benchmark on hashicorp/go-plugin's own client (package
// sdk/go/host): cold start to the first Configure for the Go and the TS sample plugins, and the
// round trip of a no-op Deploy on the Go sample. It prints figures (with -json, also one JSON
// object as the last line); run it with bench/external-go.sh, which builds the plugins first.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/manent-deployer/manent/sdk/go/host"
	"github.com/manent-deployer/manent/sdk/go/plugin"
)

func main() {
	goPlugin := flag.String("go-plugin", "", "the Go sample plugin binary (required)")
	tsPlugin := flag.String("ts-plugin", "", "the TS sample plugin bundle (optional)")
	starts := flag.Int("starts", 15, "cold starts per plugin")
	deploys := flag.Int("deploys", 2000, "no-op deploys measured")
	asJSON := flag.Bool("json", false, "print one JSON object of the figures as the last stdout line (bench/table.ts reads it)")
	flag.Parse()
	if *goPlugin == "" {
		flag.Usage()
		os.Exit(2)
	}
	base, err := os.MkdirTemp("", "manent-bench-gohost-")
	check(err)
	defer os.RemoveAll(base)

	fmt.Printf("external plugins, Go host (hashicorp/go-plugin client, AutoMTLS), %d cold starts, %d deploys\n", *starts, *deploys)
	goFigures := map[string]float64{"cold_start_ms_p50": coldStart("Go sample", *goPlugin, *starts)}
	figures := map[string]any{"bench": "external-go", "starts": *starts, "deploys": *deploys, "go_sample": goFigures}
	if *tsPlugin != "" {
		figures["ts_sample"] = map[string]float64{"cold_start_ms_p50": coldStart("TS sample", *tsPlugin, *starts)}
	}
	plain, withSecrets, oneTarget := roundTrip(*goPlugin, base, *deploys)
	goFigures["deploy_rtt_ms_p50"] = plain
	goFigures["deploy_secrets_rtt_ms_p50"] = withSecrets
	goFigures["deploy_1_target_rtt_ms_p50"] = oneTarget
	goFigures["secret_lookup_ms_p50"] = max(0, oneTarget-withSecrets)
	if *asJSON {
		out, err := json.Marshal(figures)
		check(err)
		fmt.Println(string(out))
	}
}

// coldStart measures process start + go-plugin handshake + mTLS connection + the first
// Configure, which is what the first deploy that uses a plugin waits for.
func coldStart(label, command string, n int) float64 {
	samples := make([]time.Duration, 0, n)
	for range n {
		begin := time.Now()
		p, err := host.Start(host.Config{Command: command, StartTimeout: time.Minute})
		check(err)
		_, _, err = p.Configure(context.Background(), map[string]any{})
		check(err)
		samples = append(samples, time.Since(begin))
		p.Kill()
	}
	fmt.Printf("cold start to first Configure, %s: median %s, min %s, max %s\n", label, ms(pct(samples, 50)), ms(slices.Min(samples)), ms(slices.Max(samples)))
	return msf(pct(samples, 50))
}

// roundTrip measures a Deploy with no targets: the plugin does no work, so the figure is the
// protocol's cost. With secrets, the host also serves the Secrets service on a fresh broker id
// for the call (the real Deploy path; the plugin does not dial it without targets).
// It returns the medians without and with secrets, in ms, and of a Deploy of one target that
// fails at once after the plugin has read its secret (bench/external-ts.ts measures the same: less
// the no-op Deploy, an upper bound of a secret lookup through the broker).
func roundTrip(command, base string, n int) (plain, withSecretsMs, oneTargetMs float64) {
	p, err := host.Start(host.Config{Command: command, StartTimeout: time.Minute})
	check(err)
	defer p.Kill()
	ctx := context.Background()
	_, _, err = p.Configure(ctx, map[string]any{})
	check(err)
	for _, withSecrets := range []bool{false, true} {
		req := &plugin.Request{
			DeploymentID: "bench", Artifact: plugin.Artifact{Type: "file", Name: "web", Version: "v1"},
			Targets: []plugin.Target{}, Params: map[string]string{"base": base}, Parallelism: 1,
		}
		label := "no-op Deploy round trip, Go sample"
		if withSecrets {
			req.Secrets = host.StaticSecrets{"deploy-key": "x"}
			label += ", Secrets served on the broker"
		}
		for range n / 10 { // warm up connections and the runtime
			_, err := p.Deploy(ctx, req)
			check(err)
		}
		samples := make([]time.Duration, 0, n)
		for range n {
			begin := time.Now()
			_, err := p.Deploy(ctx, req)
			samples = append(samples, time.Since(begin))
			check(err)
		}
		fmt.Printf("%s: median %s, p99 %s\n", label, ms(pct(samples, 50)), ms(pct(samples, 99)))
		if withSecrets {
			withSecretsMs = msf(pct(samples, 50))
		} else {
			plain = msf(pct(samples, 50))
		}
	}
	req := &plugin.Request{
		DeploymentID: "bench", Artifact: plugin.Artifact{Type: "file", Name: "web", Version: "v1"},
		Targets: []plugin.Target{{Host: "t1"}}, Params: map[string]string{"base": base, "fail_host": "t1"}, Parallelism: 1,
		Secrets: host.StaticSecrets{"deploy-key": "x"},
	}
	for range 20 {
		_, _ = p.Deploy(ctx, req) // the target's failure is expected
	}
	samples := make([]time.Duration, 0, max(50, n/4))
	for range max(50, n/4) {
		begin := time.Now()
		_, _ = p.Deploy(ctx, req)
		samples = append(samples, time.Since(begin))
	}
	oneTargetMs = msf(pct(samples, 50))
	fmt.Printf("Deploy of 1 failing target (one secret lookup), Go sample: median %s; less the no-op Deploy: %.3fms\n", ms(pct(samples, 50)), max(0, oneTargetMs-withSecretsMs))
	return plain, withSecretsMs, oneTargetMs
}

func pct(samples []time.Duration, p int) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", msf(d)) }

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
