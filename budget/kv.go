package budget

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// Defaults of Config.
const (
	BucketDefault = "fixpoint_budget"
	// LeaseDefault is how long a grant lives: what a worker killed holding
	// one could still have spent, and no more.
	LeaseDefault = 5 * time.Second
	// idleDefault drops a lane nobody leased for this long.
	idleDefault = time.Hour
	// casTries bounds the compare-and-swap retries of one lease; past them
	// the lease grants nothing and the lane asks again at its next renewal.
	casTries = 20
	// logEvery spaces the log lines of a coordinator that cannot be reached.
	logEvery = time.Minute
)

// Config configures a KV coordinator.
type Config struct {
	// Bucket is the KV bucket; default BucketDefault.
	Bucket string
	// Replicas of the bucket in a JetStream cluster; default 1.
	Replicas int
	// Lease is how long a grant lives; default LeaseDefault.
	Lease time.Duration
	// Logger gets a line when the coordinator cannot be reached (at most
	// one a minute) and when it answers again; nil logs nothing.
	Logger *slog.Logger
	// OnOp, when set, is called after every KV operation ("get",
	// "update", "create", and "create_bucket" when the bucket went
	// missing) with its error, for metrics.
	OnOp func(op string, err error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// KV is a lane-budget coordinator on a JetStream KV bucket; it implements
// llm.Granter and is safe for concurrent use.
type KV struct {
	js  jetstream.JetStream
	cfg Config
	id  string // this worker's name among a lane's lessees

	mu      sync.Mutex
	kv      jetstream.KeyValue
	down    bool      // the last operation failed
	lastLog time.Time // of the last outage line
}

var _ llm.Granter = (*KV)(nil)

// Open creates the bucket if it does not exist (a memory bucket: the
// budget's state is worth seconds) and returns a coordinator on it.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*KV, error) {
	cfg.Bucket = cmp.Or(cfg.Bucket, BucketDefault)
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.Replicas = cmp.Or(cfg.Replicas, 1)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	k := &KV{js: js, cfg: cfg, id: hex.EncodeToString(id[:])}
	kv, err := k.create(ctx)
	if err != nil {
		return nil, err
	}
	k.kv = kv
	return k, nil
}

// create creates the bucket, or updates its settings.
func (k *KV) create(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := k.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: k.cfg.Bucket, Description: "fixpoint: provider budgets shared by the workers (one key a lane)",
		History: 1, TTL: idleDefault, Storage: jetstream.MemoryStorage, Replicas: k.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("open the budget bucket %s: %w", k.cfg.Bucket, err)
	}
	return kv, nil
}

// bucket returns the bucket, created again when it went missing (deleted,
// or lost with the node of a memory bucket): a new one starts full, which
// is no more than a second of the budget.
func (k *KV) bucket(ctx context.Context, missing bool) (jetstream.KeyValue, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !missing {
		return k.kv, nil
	}
	kv, err := k.create(ctx)
	k.op("create_bucket", err)
	if err != nil {
		return nil, err
	}
	k.kv = kv
	return kv, nil
}

// isMissing reports whether err says the bucket's stream is gone.
func isMissing(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// Key is the KV key of a lane: a hash of its provider, base URL, model
// and key hash, so neither the API key nor a URL's credentials reach the
// bucket.
func Key(lane llm.LaneKey) string {
	sum := sha256.Sum256([]byte(lane.Provider + "\x00" + lane.BaseURL + "\x00" + lane.Model + "\x00" + lane.KeyHash))
	return "lane." + hex.EncodeToString(sum[:16])
}

// Lease takes up to want from the lane's shared budget.
func (k *KV) Lease(ctx context.Context, lane llm.LaneKey, b llm.Budget, want llm.Grant) (llm.Grant, error) {
	var g llm.Grant
	err := k.update(ctx, lane, b, func(s *state, now time.Time) {
		g = s.lease(k.id, b, want, now)
		g.Expires = now.Add(k.cfg.Lease)
	})
	if err != nil {
		return llm.Grant{}, err
	}
	return g, nil
}

// Shrink lowers the lane's budget for every worker until sh.Until.
func (k *KV) Shrink(ctx context.Context, lane llm.LaneKey, b llm.Budget, sh llm.Shrink) error {
	return k.update(ctx, lane, b, func(s *state, now time.Time) { s.shrink(b, sh, now) })
}

// errContended ends a lease that lost every compare-and-swap it tried.
var errContended = errors.New("the lane's budget key changed under every try")

// update reads the lane's state, applies f and writes it back if no other
// worker wrote it meanwhile, else tries again.
func (k *KV) update(ctx context.Context, lane llm.LaneKey, b llm.Budget, f func(*state, time.Time)) error {
	key := Key(lane)
	missing := false
	for range casTries {
		kv, err := k.bucket(ctx, missing)
		if err != nil {
			k.noteErr(lane, err)
			return err
		}
		done, err := k.try(ctx, kv, key, b, f)
		if isMissing(err) && !missing {
			missing = true
			continue
		}
		if err != nil {
			k.noteErr(lane, err)
			return err
		}
		if done {
			k.noteOK(lane)
			return nil
		}
	}
	return errContended
}

// try makes one read-modify-write; done is false when another worker
// wrote the key first.
func (k *KV) try(ctx context.Context, kv jetstream.KeyValue, key string, b llm.Budget, f func(*state, time.Time)) (done bool, err error) {
	e, err := kv.Get(ctx, key)
	k.op("get", err)
	now := k.cfg.Now()
	var s state
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		s = newState(b, now)
		f(&s, now)
		data, _ := json.Marshal(s)
		_, err = kv.Create(ctx, key, data)
		k.op("create", err)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
		return err == nil, err
	case err != nil:
		return false, err
	}
	if json.Unmarshal(e.Value(), &s) != nil {
		s = newState(b, now) // not ours to keep: the next write replaces it
	}
	f(&s, now)
	data, _ := json.Marshal(s)
	_, err = kv.Update(ctx, key, data, e.Revision())
	k.op("update", err)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return false, nil
	}
	return err == nil, err
}

func (k *KV) op(name string, err error) {
	if k.cfg.OnOp != nil {
		k.cfg.OnOp(name, err)
	}
}

// noteOK logs the coordinator's return after an outage.
func (k *KV) noteOK(lane llm.LaneKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down && k.cfg.Logger != nil {
		k.cfg.Logger.Info("budget: the coordinator answers again; lanes spend their grants",
			slog.String("bucket", k.cfg.Bucket), slog.String("lane", lane.String()))
	}
	k.down = false
}

// noteErr logs a failure at most once a minute: a coordinator outage holds
// every call of the lane (nothing beyond a grant is sent) until it answers.
func (k *KV) noteErr(lane llm.LaneKey, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down = true
	now := time.Now()
	if k.cfg.Logger == nil || now.Sub(k.lastLog) < logEvery {
		return
	}
	k.lastLog = now
	k.cfg.Logger.Warn("budget: the coordinator cannot be reached: the lane's calls wait for their next grant (none beyond one is sent, no job fails for it)",
		slog.String("bucket", k.cfg.Bucket), slog.String("lane", lane.String()), slog.String("error", err.Error()))
}
