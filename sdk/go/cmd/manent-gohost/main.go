// Command manent-gohost is a small manent host built on hashicorp/go-plugin's own client. It
// starts a plugin binary, serves the Secrets service through the go-plugin broker and runs a
// scripted sequence against a sample plugin (examples/go-plugin or examples/ts-plugin), printing
// one JSON document with every step's result or error on stdout. test/interop checks it; it is
// the proof that a plugin speaks the protocol the way go-plugin itself does.
//
//	manent-gohost -base /tmp/x -- .tools/bin/manent-plugin-go-sample
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/manent-deployer/manent/sdk/go/host"
)

func main() {
	base := flag.String("base", "", "directory the sample plugin deploys under: its param base (required)")
	secret := flag.String("secret", "s3cr3t-value", "value of the deploy-key secret")
	config := flag.String("config", "{}", "the plugin's configuration, as JSON")
	logLevel := flag.String("log-level", "warn", "level of the plugin's log lines forwarded to stderr")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: manent-gohost -base DIR [flags] -- PLUGIN_COMMAND [ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *base == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(*config), &cfg); err != nil {
		fail("flag -config: %v", err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}

	p, err := host.Start(host.Config{
		Command:      flag.Arg(0),
		Args:         flag.Args()[1:],
		StartTimeout: 30 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "plugin", Output: os.Stderr, Level: hclog.LevelFromString(*logLevel),
		}),
	})
	if err != nil {
		fail("%v", err)
	}
	defer p.Kill()

	report := run(context.Background(), p.Remote, cfg, *base, *secret)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		fail("writing the report: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "manent-gohost: "+format+"\n", args...)
	os.Exit(1)
}
