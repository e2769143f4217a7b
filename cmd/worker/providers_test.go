package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// help is worker's --help of args, run in-process.
func help(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append(args, "--help"), strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("worker %s --help: exit %d, %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// Every row of the provider table reaches every worker command: its base
// URL flag and variables in worker run's and try's help, its name in
// try's and demo's --provider, a client in build, a --base-url for try,
// and a demo that runs it. A row one of them left out fails here.
func TestEveryProviderReachesTheWorker(t *testing.T) {
	t.Parallel()
	runHelp, tryHelp, demoHelp := help(t, "run"), help(t, "try"), help(t, "demo")
	for _, p := range llm.Providers() {
		for _, want := range []string{"\n  -" + p.Name + "-base-url ", p.BaseURLEnv, p.KeyEnv} {
			for cmd, h := range map[string]string{"run": runHelp, "try": tryHelp} {
				if !strings.Contains(h, want) {
					t.Errorf("worker %s --help lacks %s's %q", cmd, p.Name, want)
				}
			}
		}
		if !strings.Contains(tryHelp, p.Name) || !strings.Contains(demoHelp, ", "+p.Name) && !strings.Contains(demoHelp, ": "+p.Name) {
			t.Errorf("worker try or demo --help does not offer --provider %s", p.Name)
		}

		var pf providerFlags
		pf.register(flag.NewFlagSet("t", flag.ContinueOnError))
		clients, cleanup, err := pf.build(nil)
		if err != nil {
			t.Fatal(err)
		}
		cleanup()
		c, ok := clients[p.Name].(*llm.Client)
		if !ok || c.Config().BaseURL != p.BaseURLDefault {
			t.Errorf("build: no client for %s at %s (%v)", p.Name, p.BaseURLDefault, clients[p.Name])
		}

		f := newTryFlags(io.Discard)
		if err := f.fs.Parse([]string{"--provider", p.Name, "--base-url", "http://127.0.0.1:1/x"}); err != nil {
			t.Fatal(err)
		}
		if err := f.setBaseURL(); err != nil || *f.pf.baseURLs[p.Name] != "http://127.0.0.1:1/x" {
			t.Errorf("worker try --provider %s --base-url: %v, base URL %q", p.Name, err, *f.pf.baseURLs[p.Name])
		}

		d := newDemoFlags(io.Discard)
		if err := d.fs.Parse([]string{"--provider", p.Name}); err != nil {
			t.Fatal(err)
		}
		if err := d.check(); err != nil {
			t.Errorf("worker demo --provider %s: %v", p.Name, err)
		}
	}
	f := newTryFlags(io.Discard)
	_ = f.fs.Parse([]string{"--provider", "nonesuch"})
	if err := f.setBaseURL(); err == nil || !strings.Contains(err.Error(), strings.Join(llm.ProviderNames(), ", ")) {
		t.Errorf("worker try --provider nonesuch: %v, want a usage error naming the providers", err)
	}
}
