package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// A worker whose queue directory is elsewhere keeps its spill directory
// (results the ledger could not take, the reply journal) beside it, not in
// the working directory (issue 36, finding 7: every run left
// .fixpoint/unwritten where it was started). --spill-dir, or
// FIXPOINT_SPILL_DIR, still puts it where it says.
func TestSpillDirFollowsTheQueueDir(t *testing.T) {
	t.Parallel()
	bin := buildCommands(t)
	dsn := storetest.NewDB(t)
	drain := func(env []string, args ...string) (work string) {
		t.Helper()
		work = t.TempDir() // where cron starts it: nothing of the worker belongs here
		cmd := exec.Command(bin+"/worker", append([]string{"--drain", "--sim", "clean"}, args...)...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), append([]string{"DATABASE_URL=" + dsn, "NATS_URL=", "FIXPOINT_NATS_DIR=", "FIXPOINT_SPILL_DIR=",
			"FIXPOINT_NATS_LISTEN=127.0.0.1:0", "FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn"}, env...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("worker --drain %v: %v\n%s", args, err, out)
		}
		return work
	}
	empty := func(dir string) {
		t.Helper()
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("the working directory holds %v (%v), want nothing", names, err)
		}
	}
	isDir := func(dir string) {
		t.Helper()
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("no spill directory at %s: %v", dir, err)
		}
	}

	state := t.TempDir()
	empty(drain(nil, "--nats-dir", filepath.Join(state, "nats")))
	isDir(filepath.Join(state, "unwritten"))

	state = t.TempDir()
	empty(drain([]string{"FIXPOINT_NATS_DIR=" + filepath.Join(state, "queue")}))
	isDir(filepath.Join(state, "unwritten"))

	// Named, it is where it says.
	state, spill := t.TempDir(), filepath.Join(t.TempDir(), "spill")
	empty(drain(nil, "--nats-dir", filepath.Join(state, "nats"), "--spill-dir", spill))
	isDir(spill)
	if _, err := os.Stat(filepath.Join(state, "unwritten")); !os.IsNotExist(err) {
		t.Errorf("a spill directory beside the queue although --spill-dir named another: %v", err)
	}
	spill = filepath.Join(t.TempDir(), "spill-env")
	empty(drain([]string{"FIXPOINT_SPILL_DIR=" + spill}, "--nats-dir", filepath.Join(t.TempDir(), "nats")))
	isDir(spill)
}

// The default spill directory is the one beside the default queue
// directory, where a worker of 0.1.0 kept its spill files: a worker
// started as before writes them.
func TestSpillDirDefaultBesideTheQueue(t *testing.T) {
	t.Setenv("FIXPOINT_NATS_DIR", "")
	t.Setenv("FIXPOINT_SPILL_DIR", "")
	f := newRunFlags(io.Discard)
	if err := f.fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	f.followQueueDir()
	if f.nf.dir != natsDirDefault || f.cfg.SpillDir != spillDirDefault || spillDirDefault != ".fixpoint/unwritten" {
		t.Errorf("with the default --nats-dir %s the spill directory is %s, want %s (.fixpoint/unwritten)", f.nf.dir, f.cfg.SpillDir, spillDirDefault)
	}
}
