package pipeline_test

// A JetStream cluster of real nats-server processes on loopback, for the
// scenarios a team running three NATS servers meets: a server killed and
// restarted, a leader moved. The servers are processes, not servers
// embedded in the test, so a kill is a SIGKILL and a restart recovers from
// what the store directory holds, as in production.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// natsServerBin is the nats-server the cluster tests run:
// FIXPOINT_NATS_SERVER, else nats-server on PATH, else /usr/sbin/nats-server
// (where the distribution's package puts it, on this machine and CI's).
func natsServerBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FIXPOINT_NATS_SERVER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	const dist = "/usr/sbin/nats-server"
	if _, err := os.Stat(dist); err != nil {
		t.Fatalf("the cluster tests run real nats-server processes, and none is installed (not on PATH, not at %s): install it (apt-get install nats-server) or set FIXPOINT_NATS_SERVER to its path", dist)
	}
	return dist
}

// natsCluster is a JetStream cluster of nats-server processes, each with
// its own ports and store directory, removed at the test's end.
type natsCluster struct {
	t     testing.TB
	bin   string
	nodes []*natsNode
}

// natsNode is one server of a natsCluster.
type natsNode struct {
	name              string
	port, clusterPort int
	dir, conf         string
	cmd               *exec.Cmd
	out               *syncBuffer
	done              chan struct{}
}

// startCluster starts n servers routed to each other and waits until
// JetStream answers (a meta leader is elected).
func startCluster(t testing.TB, n int) *natsCluster {
	t.Helper()
	c := &natsCluster{t: t, bin: natsServerBin(t)}
	dir := t.TempDir()
	for i := range n {
		c.nodes = append(c.nodes, &natsNode{name: fmt.Sprintf("n%d", i+1), port: freePort(t), clusterPort: freePort(t),
			dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1))})
	}
	var routes []string
	for _, nd := range c.nodes {
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", nd.clusterPort)))
	}
	for _, nd := range c.nodes {
		nd.conf = filepath.Join(dir, nd.name+".conf")
		conf := fmt.Sprintf(`server_name: %q
listen: "127.0.0.1:%d"
max_payload: %d
jetstream { store_dir: %q }
cluster {
  name: "fixpoint-test"
  listen: "127.0.0.1:%d"
  routes: [%s]
}
`, nd.name, nd.port, 8<<20, nd.dir, nd.clusterPort, strings.Join(routes, ", "))
		if err := os.WriteFile(nd.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.stop)
	for i := range c.nodes {
		c.start(i)
	}
	c.waitJetStream()
	return c
}

// start runs node i's server (again, after a kill: same ports and store).
func (c *natsCluster) start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	nd.out = &syncBuffer{}
	nd.cmd = exec.Command(c.bin, "-c", nd.conf)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.out, nd.out
	nd.done = make(chan struct{})
	if err := nd.cmd.Start(); err != nil {
		c.t.Fatalf("start nats-server %s: %v", nd.name, err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(nd.cmd, nd.done)
	addr := fmt.Sprintf("nats://127.0.0.1:%d", nd.port)
	waitFor(c.t, 15*time.Second, "nats-server "+nd.name+" taking clients", func() bool {
		select {
		case <-nd.done:
			c.t.Fatalf("nats-server %s exited at start:\n%s", nd.name, nd.out.tail(30))
		default:
		}
		nc, err := nats.Connect(addr, nats.NoReconnect(), nats.Timeout(time.Second))
		if err != nil {
			return false
		}
		nc.Close()
		return true
	})
}

// kill sends node i's server SIGKILL and waits for it to exit.
func (c *natsCluster) kill(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if err := nd.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill nats-server %s: %v", nd.name, err)
	}
	select {
	case <-nd.done:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("nats-server %s still running 10s after SIGKILL", nd.name)
	}
}

// stop kills every server still running, and shows their output when the
// test failed.
func (c *natsCluster) stop() {
	for _, nd := range c.nodes {
		if nd.cmd == nil {
			continue
		}
		select {
		case <-nd.done:
		default:
			_ = nd.cmd.Process.Signal(syscall.SIGKILL)
			<-nd.done
		}
		if c.t.Failed() {
			c.t.Logf("nats-server %s output (tail):\n%s", nd.name, nd.out.tail(30))
		}
	}
}

// urls lists every server's client URL, node first first: what a worker
// is given (--nats-url), the one it connects to first in front.
func (c *natsCluster) urls(first int) string {
	var us []string
	for k := range c.nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[(first+k)%len(c.nodes)].port))
	}
	return strings.Join(us, ",")
}

// connect opens a connection that tries node first first and, when it is
// lost, the others, reconnecting forever as the commands' connections do.
func (c *natsCluster) connect(first int) (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, err := nats.Connect(c.urls(first), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		c.t.Fatalf("connect to the cluster at %s: %v", c.urls(first), err)
	}
	if got, want := nc.ConnectedServerName(), c.nodes[first].name; got != want {
		nc.Close()
		c.t.Fatalf("connected to %s, want %s", got, want)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return nc, js
}

// waitJetStream waits until the cluster's JetStream answers an account
// info request, which needs an elected meta leader.
func (c *natsCluster) waitJetStream() {
	c.t.Helper()
	nc, js := c.connect(0)
	defer nc.Close()
	var last error
	if !poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, last = js.AccountInfo(ctx)
		return last == nil
	}) {
		c.t.Fatalf("the JetStream cluster did not answer within 30s: %v", last)
	}
}

// index is the node of the server named name, -1 for none.
func (c *natsCluster) index(name string) int {
	for i, nd := range c.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// streamLeader returns the name of the stream's leader and whether every
// replica is current (caught up with the leader), "" when it has none.
func streamLeader(ctx context.Context, js jetstream.JetStream, stream string) (leader string, allCurrent bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", false
	}
	ci := s.CachedInfo().Cluster
	if ci == nil {
		return "", false
	}
	allCurrent = ci.Leader != ""
	for _, r := range ci.Replicas {
		allCurrent = allCurrent && r.Current && !r.Offline
	}
	return ci.Leader, allCurrent
}

// consumerLeader returns the name of the consumer's leader, "" when it has
// none or cannot say.
func consumerLeader(ctx context.Context, js jetstream.JetStream, stream, consumer string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, consumer)
	if err != nil || cons.CachedInfo().Cluster == nil {
		return ""
	}
	return cons.CachedInfo().Cluster.Leader
}

// stepDown asks the leader of what subject names (a stream's or a
// consumer's: $JS.API.STREAM.LEADER.STEPDOWN.<stream>) to hand over, and
// waits until leader reports another one, asking again while the old one
// keeps it (an election may elect it again).
func stepDown(t testing.TB, nc *nats.Conn, subject string, leader func() string) (from, to string) {
	t.Helper()
	waitFor(t, 20*time.Second, "a leader before "+subject, func() bool { from = leader(); return from != "" })
	var last string
	waitFor(t, 30*time.Second, "another leader after "+subject, func() bool {
		if to = leader(); to != "" && to != from {
			return true
		}
		msg, err := nc.Request(subject, nil, 2*time.Second)
		if err != nil {
			last = err.Error()
			return false
		}
		var resp struct {
			Success bool `json:"success"`
			Error   *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error != nil {
			last = string(msg.Data)
		}
		return false
	})
	if to == from {
		t.Fatalf("%s: the leader is still %s (%s)", subject, from, last)
	}
	return from, to
}

// ackWatch checks every ack of the stream's messages as the servers see
// it: the job it acks must be final in the ledger already. It maps stream
// sequences to job ids before any worker starts (an acked message leaves
// a work-queue stream).
type ackWatch struct {
	sub *nats.Subscription
	mu  sync.Mutex
	// acks counts the acks seen; early the ones of jobs not final.
	acks, early int
	errs        []string
}

// watchAcks subscribes to the acks of h's stream, whose n messages are
// published and none delivered yet.
func (h *harness) watchAcks(nc *nats.Conn, n int) *ackWatch {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, h.q.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	jobs := map[uint64]string{}
	for seq := uint64(1); len(jobs) < n; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			h.t.Fatalf("read message %d of %d: %v", seq, n, err)
		}
		id, ok := queue.JobIDFromMsgID(m.Header.Get(jetstream.MsgIDHeader))
		if !ok {
			h.t.Fatalf("message %d: no job id in %q", seq, m.Header.Get(jetstream.MsgIDHeader))
		}
		jobs[seq] = id
	}
	w := &ackWatch{}
	// Ack subjects: $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>...
	w.sub, err = nc.Subscribe("$JS.ACK."+h.q.Stream+".>", func(m *nats.Msg) {
		if !strings.HasPrefix(string(m.Data), "+ACK") {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.acks++
		var seq uint64
		tok := strings.Split(m.Subject, ".")
		if len(tok) > 5 {
			_, _ = fmt.Sscan(tok[5], &seq)
		}
		id, ok := jobs[seq]
		if !ok {
			w.errs = append(w.errs, "an ack of a message not of the batch: "+m.Subject)
			return
		}
		j, _, err := h.st.Job(context.Background(), id)
		switch {
		case err != nil:
			w.errs = append(w.errs, fmt.Sprintf("job %s acked: %v", id, err))
		case !j.Status.Final():
			w.early++
			w.errs = append(w.errs, fmt.Sprintf("job %s acked while %s in the ledger", id, j.Status))
		}
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
	return w
}

// stop ends the watch and returns the acks seen, the early ones among
// them, and what was wrong.
func (w *ackWatch) stop(t testing.TB) (acks, early int, errs []string) {
	t.Helper()
	if err := w.sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("stop watching acks: %v", err)
	}
	waitFor(t, 10*time.Second, "the ack watch drained", func() bool { return !w.sub.IsValid() })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acks, w.early, w.errs
}

// clusterWorkers are the workers of a cluster scenario: one in the test
// process on each server (connected to it first, moving to the others
// when it is lost), and a worker process given the whole server list and
// --stream-replicas, as an operator runs it (nats.go picks its server).
type clusterWorkers struct {
	rws     []*runningWorker
	cfgs    []pipeline.WorkerConfig
	proc    *proc
	metrics string // the process's /metrics URL
}

// startClusterWorkers starts the workers, each running conc jobs at a time.
func (h *harness) startClusterWorkers(conc int) *clusterWorkers {
	h.t.Helper()
	cw := &clusterWorkers{}
	for i := range h.cluster.nodes {
		nc, js := h.cluster.connect(i)
		h.t.Cleanup(nc.Close)
		cfg := h.workerConfig(h.client(nil))
		cfg.Concurrency = conc
		cw.cfgs = append(cw.cfgs, cfg)
		cw.rws = append(cw.rws, h.startWorker(cfg, js, nil))
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(h.t))
	cw.metrics = "http://" + addr + "/metrics"
	cw.proc = h.startProc("", nil, "--nats-url", h.cluster.urls(0), "--stream-replicas", strconv.Itoa(h.q.Replicas),
		"--concurrency", strconv.Itoa(conc), "--metrics-addr", addr)
	return cw
}

// names names each worker, in the order of acked's counts.
func (cw *clusterWorkers) names(c *natsCluster) []string {
	var names []string
	for i := range cw.rws {
		names = append(names, "the worker on "+c.nodes[i].name)
	}
	return append(names, "the worker process")
}

// messages returns each worker's count of messages disposed of as kind
// (ack, skip), the process's last (-1 when its metrics cannot be read).
func (cw *clusterWorkers) messages(kind string) []float64 {
	var n []float64
	for _, cfg := range cw.cfgs {
		n = append(n, metricValue(cfg.Metrics.Dispositions.WithLabelValues(kind)))
	}
	return append(n, scrapeCounter(cw.metrics, `fixpoint_messages_total{disposition="`+kind+`"}`))
}

// stop stops every worker: each must end without an error, the process
// with exit 0 on SIGTERM. It reads the process's counts first.
func (cw *clusterWorkers) stop(t testing.TB) (acked, skipped []float64) {
	t.Helper()
	acked, skipped = cw.messages("ack"), cw.messages("skip")
	for i, rw := range cw.rws {
		if err := rw.stop(t, 30*time.Second); err != nil {
			t.Errorf("worker %d: Run: %v", i, err)
		}
	}
	if err := cw.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cw.proc.wait(t, 30*time.Second); err != nil {
		t.Errorf("the worker process after SIGTERM: %v, want exit 0", err)
	}
	return acked, skipped
}

// scrapeCounter reads the value of one series from a Prometheus text
// page, 0 when the page lacks it (a counter not yet counted), -1 when the
// page cannot be read.
func scrapeCounter(url, series string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return 0
}

// checkReplicas checks that the job stream, the workers' consumer and the
// dead-job stream are each kept by want servers (a leader and want-1
// followers), waiting for a stream scaled up to place its new replicas.
func (h *harness) checkReplicas(want int) {
	h.t.Helper()
	var last string
	if !poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
		defer cancel()
		var got []string
		for _, name := range []string{h.q.Stream, h.q.DeadStream()} {
			s, err := h.js.Stream(ctx, name)
			if err != nil {
				last = err.Error()
				return false
			}
			si := s.CachedInfo()
			got = append(got, fmt.Sprintf("stream %s: %d replicas configured, %s", name, si.Config.Replicas, placed(si.Cluster)))
		}
		c, err := h.js.Consumer(ctx, h.q.Stream, h.q.Consumer)
		if err != nil {
			last = err.Error()
			return false
		}
		got = append(got, "consumer: "+placed(c.CachedInfo().Cluster))
		last = strings.Join(got, "; ")
		return last == fmt.Sprintf("stream %s: %[2]d replicas configured, %[2]d servers; stream %[3]s: %[2]d replicas configured, %[2]d servers; consumer: %[2]d servers",
			h.q.Stream, want, h.q.DeadStream())
	}) {
		h.t.Errorf("want everything on %d servers: %s", want, last)
	}
}

// placed says on how many servers a stream or consumer is.
func placed(ci *jetstream.ClusterInfo) string {
	if ci == nil || ci.Leader == "" {
		return "no leader"
	}
	return fmt.Sprintf("%d servers", 1+len(ci.Replicas))
}

// A stream made with one replica (enqueue before the cluster was set up)
// is moved onto three servers by the first worker set-up that asks for
// three, with its consumer and the dead-job stream.
func TestClusterScalesTheStreamUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{Cluster: 3, Queue: queue.Config{Replicas: 1}})
	h.enqueue("b", 5)
	if _, _, err := queue.Ensure(h.ctx, h.js, h.q); err != nil {
		t.Fatal(err)
	}
	h.checkReplicas(1)
	three := h.q
	three.Replicas = 3
	if _, _, err := queue.Ensure(h.ctx, h.js, three); err != nil {
		t.Fatalf("Ensure with 3 replicas on a stream of 1: %v", err)
	}
	h.checkReplicas(3)
	// The worker asks for three too, as every worker of a cluster does:
	// one asking for one would move the stream back, and wait for that.
	wcfg := h.workerConfig(h.client(nil))
	wcfg.Queue = three
	rw := h.startWorker(wcfg, nil, nil)
	// The worker's own set-up may wait up to queue.SetupWait for the
	// moved consumer's leader before it pulls (a loaded machine elects
	// slowly); five jobs then take a second.
	h.waitDone("b", 5, queue.SetupWait+30*time.Second)
	rw.stop(t, 20*time.Second)
	h.checkClusterQueueDrained(5)
	h.checkInvariants("b", invariants{Jobs: 5, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: 5}, SkipQueue: true})
}

// checkClusterQueueDrained is I3 for a cluster whose server was killed or
// whose stream was scaled up: the consumer has nothing left to deliver and
// nothing awaiting an ack. The stream itself may still hold messages the
// consumer acked: nats-server 2.9 applies a work-queue stream's ack-driven
// deletes on each replica as its consumer sees the ack, and a replica that
// caught up from a snapshot keeps the messages it missed (nats-server
// issue 2243); a stream scaled from one replica to three keeps every
// message its consumer acks until the consumer's leader moves (issue
// 3953). Once such a replica leads the stream, its count shows them. They are below the consumer's ack floor, so nothing
// delivers them again; the check reads each and requires its job final in
// the ledger, and at most maxLeft of them. It returns how many there were.
func (h *harness) checkClusterQueueDrained(maxLeft int) int {
	h.t.Helper()
	var (
		si   *jetstream.StreamInfo
		ci   *jetstream.ConsumerInfo
		last string
	)
	ok := poll(15*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := h.js.Stream(ctx, h.q.Stream)
		if err == nil {
			si, err = s.Info(ctx)
		}
		if err == nil {
			ci = h.consumerInfo()
		}
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("stream msgs %d, consumer pending %d, ack pending %d", si.State.Msgs, ci.NumPending, ci.NumAckPending)
		return ci.NumPending == 0 && ci.NumAckPending == 0 && si.State.Msgs <= uint64(maxLeft)
	})
	if !ok {
		h.t.Errorf("I3: queue not drained: %s", last)
		return -1
	}
	if si.State.Msgs == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, h.q.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	left := 0
	for seq := si.State.FirstSeq; seq <= si.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			h.t.Fatalf("read stream message %d: %v", seq, err)
		}
		left++
		if seq > ci.AckFloor.Stream {
			h.t.Errorf("I3: stream message %d is past the consumer's ack floor %d: not acked", seq, ci.AckFloor.Stream)
		}
		env, err := queue.DecodeEnvelope(m.Data)
		if err != nil {
			h.t.Errorf("I3: stream message %d: %v", seq, err)
			continue
		}
		if j, _ := h.job(env.JobID); !j.Status.Final() {
			h.t.Errorf("I3: stream message %d holds job %s, %s in the ledger: not final", seq, env.JobID, j.Status)
		}
	}
	return left
}
