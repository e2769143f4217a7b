package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// spill keeps on local disk what the ledger could not take when the worker
// had to let go of it: the results and interrupted calls of jobs handed
// back while the ledger was unreachable (at a stop, when the worker cannot
// wait for it). The calls in them were paid for: the next worker started
// with the same spill directory writes them before it pulls a job
// (replaySpill). SaveResults and SaveInterrupted are idempotent, and a
// result that lost to a later delivery's keeps its calls as superseded.
type spill struct {
	dir string
	log *slog.Logger

	mu   sync.Mutex
	f    *os.File
	path string
	n    int
	// lost counts the records neither the ledger nor the disk took.
	lost atomic.Int64
}

// spillRecord is one line of a spill file: a result or an interruption.
type spillRecord struct {
	Result      *store.Result       `json:"result,omitempty"`
	Interrupted *store.Interruption `json:"interrupted,omitempty"`
}

// spillGlob matches the spill files of a directory.
const spillGlob = "unwritten-*.jsonl"

// add appends rec to this worker's spill file, creating it at the first
// record; it reports whether rec is on disk. A nil spill (no directory)
// keeps nothing.
func (s *spill) add(rec spillRecord) bool {
	if s == nil {
		return false
	}
	if s.dir == "" {
		s.lost.Add(1)
		return false
	}
	line, err := json.Marshal(rec)
	if err == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.f == nil {
			s.path = filepath.Join(s.dir, fmt.Sprintf("unwritten-%d-%d.jsonl", time.Now().UnixNano(), os.Getpid()))
			s.f, err = createLocked(s.path)
		}
		if err == nil {
			_, err = s.f.Write(append(line, '\n'))
		}
		if err == nil {
			err = s.f.Sync()
		}
	}
	if err != nil {
		s.lost.Add(1)
		s.log.Error("worker: keep an unwritten result on disk", slog.String("dir", s.dir), slog.String("error", err.Error()))
		return false
	}
	s.n++
	return true
}

// CheckSpillDir makes dir and checks a file can be written in it, so that
// a worker finds an unusable spill directory at start, not when it needs
// it at a stop. "" (keep nothing) passes.
func CheckSpillDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// close closes the spill file and says where it is and what it holds.
func (s *spill) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return
	}
	if err := s.f.Close(); err != nil {
		s.log.Error("worker: close the spill file", slog.String("path", s.path), slog.String("error", err.Error()))
	}
	s.f = nil
	s.log.Error("worker: results and calls the ledger could not take are kept on disk; the next worker started with this spill directory writes them",
		slog.String("path", s.path), slog.Int("records", s.n))
}

// createLocked creates path (and its directory) for appending, holding an
// exclusive flock on it for as long as it is open: a worker starting on
// the same directory leaves a file it cannot lock alone. The file is made
// under another name and locked before it gets its own, so a starting
// worker never finds it unlocked.
func createLocked(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp := filepath.Join(filepath.Dir(path), ".new-"+filepath.Base(path))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// openUnlocked opens path for reading and takes its flock; errFileLive
// when the worker that writes it holds it.
func openUnlocked(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errFileLive
		}
		return nil, err
	}
	return f, nil
}

// errFileLive: a spill file or journal segment's worker is running.
var errFileLive = errors.New("in use by a running worker")

// removeGone removes path; one already gone (its worker removed it once
// all of it was written) is no error.
func removeGone(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// replaySpill writes to the ledger what the spill files in dir hold and
// removes each file once all of it is written; a file the ledger does not
// take yet stays for the next start, and so does one a running worker
// still writes (it is locked). It returns how many records it wrote.
func replaySpill(ctx context.Context, dir string, ledger Ledger, log *slog.Logger) (int, error) {
	return replayEach(dir, spillGlob, "spill file", func(path string) (int, error) {
		n, err := replaySpillFile(ctx, path, ledger)
		if err == nil {
			log.InfoContext(ctx, "worker: wrote the results and calls a stopped worker kept on disk", slog.String("path", path), slog.Int("records", n))
		}
		return n, err
	})
}

// replayEach calls replay for each file of dir matching glob, in name
// order, and returns the sum of what it returned. A file its worker still
// writes (errFileLive) is skipped; the other errors, each naming its file
// as a what, are joined.
func replayEach(dir, glob, what string, replay func(path string) (int, error)) (int, error) {
	if dir == "" {
		return 0, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		return 0, err
	}
	slices.Sort(files)
	total := 0
	var errs []error
	for _, path := range files {
		n, err := replay(path)
		total += n
		if err != nil && !errors.Is(err, errFileLive) {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, path, err))
		}
	}
	return total, errors.Join(errs...)
}

// ledgerHas returns an error naming a job of ids the ledger does not
// have: a spill directory shared by workers of another ledger (a relative
// path, run from one directory) must not make batches appear here.
func ledgerHas(ctx context.Context, ledger Ledger, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	known, err := ledger.JobStates(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, ok := known[id]; !ok {
			return fmt.Errorf("job %s is not in this ledger (was the file written by a worker on another DATABASE_URL?)", id)
		}
	}
	return nil
}

// replaySpillFile writes one spill file's records and removes it, under
// its lock.
func replaySpillFile(ctx context.Context, path string, ledger Ledger) (int, error) {
	f, err := openUnlocked(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	var results []store.Result
	var ins []store.Interruption
	var ids []string
	for i, line := range lines {
		var rec spillRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			if i == len(lines)-1 {
				break // cut short by a crash while it was written
			}
			return 0, fmt.Errorf("line %d: %w", i+1, err)
		}
		switch {
		case rec.Result != nil && rec.Result.JobID != "":
			results = append(results, *rec.Result)
			ids = append(ids, rec.Result.JobID)
		case rec.Interrupted != nil && rec.Interrupted.JobID != "":
			ins = append(ins, *rec.Interrupted)
			ids = append(ids, rec.Interrupted.JobID)
		default:
			return 0, fmt.Errorf("line %d is neither a result nor interrupted calls: not a spill file of this worker", i+1)
		}
	}
	if err := ledgerHas(ctx, ledger, ids); err != nil {
		return 0, err
	}
	// Interrupted calls first: their jobs have rows (the results' jobs get
	// theirs from the results themselves).
	// A record the ledger refuses for its data is saved as it can take it
	// (its calls were paid for): kept on disk, it would block the file at
	// every start.
	if _, err := saveInterruptedSalvaging(ctx, ledger, ins); err != nil {
		return 0, err
	}
	for chunk := range slices.Chunk(results, 256) {
		_, err := ledger.SaveResults(ctx, chunk)
		if store.IsRefused(err) {
			err = nil
			for _, r := range chunk {
				if _, _, err = saveSalvaging(ctx, ledger, r); err != nil {
					break
				}
			}
		}
		if err != nil {
			return len(ins), err
		}
	}
	return len(ins) + len(results), removeGone(path)
}
