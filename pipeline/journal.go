package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// journal keeps every reply the worker receives on local disk, in its
// spill directory, until the delivery it came in has ended: its result
// committed, its calls kept apart, or either kept on disk (spill). A
// worker killed (kill -9, out of memory) loses what it held in memory,
// but not the file: the next worker started with the same directory
// records each reply the ledger does not have as a crashed call
// (store.SaveCrashed), so every reply a provider was paid for leaves a row.
// Lines are written, not synced: they outlive the process, not the machine.
//
// A segment file is locked (flock) while its worker has it open, so a
// worker sharing the directory never records the replies of one still
// running; a segment is removed once it is no longer written to and every
// delivery with a line in it has ended.
type journal struct {
	dir string
	log *slog.Logger
	// max is how many lines a segment takes before the next one starts.
	max int

	mu   sync.Mutex
	cur  *segment
	open map[string][]*segment // deliveries not ended, by journalKey
	// sending holds, by delivery and call (callOf), the segment of each
	// call in flight: its outcome goes to the same file as its sent line.
	// A document job has several calls in flight at once.
	sending map[string]map[string]*segment
	warn    bool // a failure to write was logged
}

// journalLine is one line of a segment: a paid reply received (the
// Interruption, one attempt), a call sent (Sent: the attempt it would be
// with no reply, see repair.Step.Outstanding), or the end of a call whose
// outcome was not a paid reply (Ended: no attempt). Call names the call
// a line is about (callOf): a sent line whose call has no later line in
// its segment was in flight when the worker died. An ended line without
// it (written before document jobs had calls in flight together) ends
// the delivery's one call in flight.
type journalLine struct {
	store.Interruption
	Sent  bool   `json:",omitempty"`
	Ended bool   `json:",omitempty"`
	Call  string `json:",omitempty"`
}

// segment is one journal file.
type segment struct {
	f    *os.File
	path string
	n    int // lines written
	live int // deliveries with a line here that have not ended
}

// journalGlob matches the journal segments of a directory.
const journalGlob = "replies-*.jsonl"

// journalSegmentLines is how many replies a segment holds before the next
// one starts, so that the files of a long run are removed as it goes.
const journalSegmentLines = 4096

// journalKey identifies a delivery of a job.
func journalKey(jobID string, delivered int) string {
	return jobID + "\x00" + strconv.Itoa(delivered)
}

// newJournal returns the journal of a worker whose spill directory is dir;
// nil (keep nothing) when dir is "".
func newJournal(dir string, log *slog.Logger) *journal {
	if dir == "" {
		return nil
	}
	return &journal{dir: dir, log: log, max: journalSegmentLines, open: map[string][]*segment{}, sending: map[string]map[string]*segment{}}
}

// add writes one reply of a delivery: in, with one attempt. It ends that
// attempt's call in flight.
func (j *journal) add(key string, in store.Interruption) {
	j.write(key, journalLine{Interruption: in, Call: callOf(in)})
}

// callOf names the call of in's one attempt by its request's hash: a
// Machine numbers its attempts in the order their outcomes are fed, so
// the attempt a call's outcome records need not have the No its sent
// line had, but it has its request. The No names a call with no hash.
func callOf(in store.Interruption) string {
	if len(in.Attempts) == 0 {
		return ""
	}
	if h := in.Attempts[0].RequestHash; h != "" {
		return h
	}
	return "no:" + strconv.Itoa(in.Attempts[0].No)
}

// sent writes a call of a delivery as it goes out: in, with the attempt
// it would be should no reply come. add or ended ends it.
func (j *journal) sent(key string, in store.Interruption) {
	j.write(key, journalLine{Interruption: in, Sent: true, Call: callOf(in)})
}

// ended ends a delivery's call in flight that got no paid reply (a
// provider error before any reply): call is callOf the attempt it
// recorded, in names the delivery, with no attempt.
func (j *journal) ended(key string, call string, in store.Interruption) {
	j.write(key, journalLine{Interruption: in, Ended: true, Call: call})
}

// write appends l, a line of the delivery key, to the segment of the
// delivery's call in flight or else the current one.
func (j *journal) write(key string, l journalLine) {
	if j == nil {
		return
	}
	line, err := json.Marshal(l)
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.failed(err)
		return
	}
	seg := j.sending[key][l.Call]
	delete(j.sending[key], l.Call)
	if seg == nil {
		if j.cur == nil || j.cur.n >= j.max {
			if err := j.rotate(); err != nil {
				j.failed(err)
				return
			}
		}
		seg = j.cur
	}
	if _, err := seg.f.Write(append(line, '\n')); err != nil {
		j.failed(err)
		return
	}
	seg.n++
	if l.Sent {
		if j.sending[key] == nil {
			j.sending[key] = map[string]*segment{}
		}
		j.sending[key][l.Call] = seg
	}
	if segs := j.open[key]; !slices.Contains(segs, seg) {
		j.open[key] = append(segs, seg)
		seg.live++
	}
}

// rotate starts a new segment; the current one is removed when no
// delivery in it is live. j.mu is held.
func (j *journal) rotate() error {
	if old := j.cur; old != nil {
		j.cur = nil
		j.drop(old)
	}
	path := filepath.Join(j.dir, fmt.Sprintf("replies-%d-%d.jsonl", time.Now().UnixNano(), os.Getpid()))
	f, err := createLocked(path)
	if err != nil {
		return err
	}
	j.cur = &segment{f: f, path: path}
	return nil
}

// drop closes and removes seg when it is not written to and no delivery in
// it is live. j.mu is held.
func (j *journal) drop(seg *segment) {
	if seg == j.cur || seg.live > 0 {
		return
	}
	if err := os.Remove(seg.path); err != nil {
		j.log.Warn("worker: remove a reply journal segment", slog.String("path", seg.path), slog.String("error", err.Error()))
	}
	seg.f.Close()
}

// done says a delivery has ended: what its replies paid for is in the
// ledger, or kept on disk by the spill.
func (j *journal) done(key string) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	segs, ok := j.open[key]
	if !ok {
		return
	}
	delete(j.open, key)
	delete(j.sending, key)
	for _, seg := range segs {
		seg.live--
		j.drop(seg)
	}
}

// close ends the journal at the worker's stop: the current segment goes
// when no delivery in it is live. A segment still live (a delivery that
// never ended) stays for the next start, which records what the ledger
// lacks of it.
func (j *journal) close() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if cur := j.cur; cur != nil {
		j.cur = nil
		j.drop(cur)
	}
	if len(j.open) > 0 {
		j.log.Warn("worker: replies of deliveries that did not end are kept in the reply journal for the next start",
			slog.Int("deliveries", len(j.open)), slog.String("dir", j.dir))
	}
}

// failed logs, once, that the journal could not keep a reply: a crash
// would lose it. j.mu is held.
func (j *journal) failed(err error) {
	if j.warn {
		return
	}
	j.warn = true
	j.log.Error("worker: the reply journal cannot be written: replies received when the worker is killed would leave no row",
		slog.String("dir", j.dir), slog.String("error", err.Error()))
}

// replayJournals records what the reply journals in dir left by workers
// that died hold and the ledger lacks (store.SaveCrashed), then removes
// them. A segment locked by a running worker is left alone, and so is one
// holding jobs this ledger does not have (a directory shared by workers of
// another ledger). It returns how many calls it recorded.
func replayJournals(ctx context.Context, dir string, ledger Ledger, log *slog.Logger) (int, error) {
	return replayEach(dir, journalGlob, "reply journal", func(path string) (int, error) {
		n, err := replayJournal(ctx, path, ledger, log)
		if err == nil && n > 0 {
			log.WarnContext(ctx, "worker: recorded the calls a worker that died had made and not written (reason crashed: replies it had received, calls in flight)",
				slog.String("path", path), slog.Int("calls", n))
		}
		return n, err
	})
}

// replayJournal records one dead worker's segment and removes it, under
// its lock.
func replayJournal(ctx context.Context, path string, ledger Ledger, log *slog.Logger) (int, error) {
	f, err := openUnlocked(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var ins []store.Interruption
	var ids []string
	inFlight := map[string]map[string]int{} // delivery -> call -> its sent line, in ins
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.JobID == "" {
			continue // a line cut short by the kill
		}
		key := journalKey(l.JobID, l.Delivery)
		call := l.Call
		if call == "" && !l.Ended {
			call = callOf(l.Interruption)
		}
		for c, i := range inFlight[key] {
			if c == call || (call == "" && l.Ended) {
				// The call in flight has its outcome: drop its sent line.
				ins[i].Attempts = nil
				delete(inFlight[key], c)
			}
		}
		switch {
		case l.Ended:
			continue
		case l.Sent:
			if inFlight[key] == nil {
				inFlight[key] = map[string]int{}
			}
			inFlight[key][call] = len(ins)
		}
		ins = append(ins, l.Interruption)
		ids = append(ids, l.JobID)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	renumberInFlight(ins, inFlight)
	if err := ledgerHas(ctx, ledger, ids); err != nil {
		return 0, err
	}
	n, err := ledger.SaveCrashed(ctx, ins)
	if store.IsRefused(err) {
		// A reply the ledger refuses for its data (a price table's typo
		// beyond the cost column) is recorded as it can take it, and the
		// others as they are: the segment kept would be refused at every
		// start, none of its paid replies recorded. SaveCrashed skips
		// what it has, so n counts each call once.
		n = 0
		var refused int
		refused, err = saveEachSalvaging(ins, func(one []store.Interruption) error {
			k, err := ledger.SaveCrashed(ctx, one)
			n += k
			return err
		})
		if refused > 0 {
			log.ErrorContext(ctx, "worker: ledger refused crashed calls: recorded without what it refused",
				slog.String("path", path), slog.Int("calls", refused))
		}
	}
	if err != nil {
		return n, err
	}
	return n, removeGone(path)
}

// renumberInFlight gives each call still in flight (inFlight: delivery ->
// call -> its line in ins) a number no reply of its delivery has. A
// Machine numbers its calls in flight after the attempts recorded and a
// reply by the order it was fed, so a call sent third may be recorded
// first, taking the number the journal wrote for a call sent first: the
// ledger keeps one row per number, and would drop the other.
func renumberInFlight(ins []store.Interruption, inFlight map[string]map[string]int) {
	used := map[string]map[int]bool{}
	last := map[string]int{}
	inFlightLine := map[int]bool{}
	for _, calls := range inFlight {
		for _, i := range calls {
			inFlightLine[i] = true
		}
	}
	for i, in := range ins {
		key := journalKey(in.JobID, in.Delivery)
		for _, a := range in.Attempts {
			if used[key] == nil {
				used[key] = map[int]bool{}
			}
			if !inFlightLine[i] {
				used[key][a.No] = true
			}
			last[key] = max(last[key], a.No)
		}
	}
	for i := range ins {
		if !inFlightLine[i] || len(ins[i].Attempts) != 1 {
			continue
		}
		key := journalKey(ins[i].JobID, ins[i].Delivery)
		if a := &ins[i].Attempts[0]; used[key][a.No] {
			last[key]++
			a.No = last[key]
		}
		used[key][ins[i].Attempts[0].No] = true
	}
}
