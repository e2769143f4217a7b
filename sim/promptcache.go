package sim

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Prompt-cache rules (see "Prompt caching" in the package documentation).
const (
	// OpenAICacheMinTokens is the shortest OpenAI prompt that is cached.
	OpenAICacheMinTokens = 1024
	// OpenAICacheIncrement is the step of OpenAI's cached_tokens.
	OpenAICacheIncrement = 128
	// AnthropicCacheMinTokens is the minimum cacheable prefix of Claude
	// Sonnet 4 and 4.5 and Opus 4 and 4.1, the default of every model.
	AnthropicCacheMinTokens = 1024
	// AnthropicHaikuCacheMinTokens is the minimum cacheable prefix of
	// Claude Haiku 3 and 3.5, used for a model whose name contains "haiku".
	AnthropicHaikuCacheMinTokens = 2048
	// anthropicMaxBreakpoints is the number of cache_control blocks a
	// request may carry.
	anthropicMaxBreakpoints = 4
	// anthropicLookback is how many block boundaries before a breakpoint
	// Anthropic checks for an earlier cached prefix.
	anthropicLookback = 20
	// cachePruneEvery is how many writes go between sweeps of the expired
	// entries.
	cachePruneEvery = 4096
)

// cacheBound is a content-block boundary of an Anthropic prompt: where the
// tools, a system block or a message ends. off counts bytes from the start
// of the system prompt; the tools before it are the request's schema.
type cacheBound struct {
	off int
	// bp marks a cache_control breakpoint, ttl its "ttl" (0: the default).
	bp  bool
	ttl time.Duration
}

// cacheUse is what the cache did for one request, in tokens.
type cacheUse struct {
	read    int // OpenAI cached_tokens, Anthropic cache_read_input_tokens
	write5m int // Anthropic cache writes with the 5-minute TTL
	write1h int // and with the 1-hour TTL
}

func (u cacheUse) write() int { return u.write5m + u.write1h }

// promptCache holds the prefixes the server has seen, by a hash of the
// provider, model, cache key and prefix, with their expiry.
type promptCache struct {
	mu      sync.Mutex
	entries map[prefixKey]cacheEntry
	writes  int

	hits, reads, writers, written atomic.Int64
}

type prefixKey struct {
	h uint64
	n int // the prefix length in bytes
}

type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

// lookup reports whether a prefix is cached at now, refreshing it if so.
// The caller holds mu.
func (c *promptCache) lookup(k prefixKey, now time.Time) bool {
	e, ok := c.entries[k]
	if !ok || !now.Before(e.expires) {
		return false
	}
	e.expires = now.Add(e.ttl)
	c.entries[k] = e
	return true
}

// put caches a prefix until now+ttl. The caller holds mu.
func (c *promptCache) put(k prefixKey, now time.Time, ttl time.Duration) {
	if c.entries == nil {
		c.entries = map[prefixKey]cacheEntry{}
	}
	if e, ok := c.entries[k]; ok && e.ttl > ttl && now.Before(e.expires) {
		ttl = e.ttl // a 5-minute write does not shorten a live 1-hour entry
	}
	c.entries[k] = cacheEntry{expires: now.Add(ttl), ttl: ttl}
	c.writes++
	if c.writes%cachePruneEvery == 0 {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
	}
}

func (c *promptCache) count(u cacheUse) {
	if u.read > 0 {
		c.hits.Add(1)
		c.reads.Add(int64(u.read))
	}
	if w := u.write(); w > 0 {
		c.writers.Add(1)
		c.written.Add(int64(w))
	}
}

// cacheStreamLen is the length of the prompt in the order the providers
// cache it: the schema (tools, response_format), the system prompt, then
// the messages. It is the prompt's byte count (promptBytes).
func cacheStreamLen(r *chatReq) int {
	n := len(r.schema) + len(r.system)
	for _, m := range r.msgs {
		n += len(m.text)
	}
	return n
}

// prefixHashes returns the hash of the first cuts[i] bytes of r's cache
// stream for each cut (ascending, each at most the stream's length). The
// hash starts from seed (provider, model, cache key) and marks where each
// part starts, so that "ab"+"c" and "a"+"bc" differ.
func prefixHashes(seed uint64, r *chatReq, cuts []int) []uint64 {
	x := streamHasher{h: seed, cuts: cuts, out: make([]uint64, 0, len(cuts))}
	if r.schema != nil {
		x.mark('t')
		feed(&x, r.schema)
	}
	x.mark('s')
	feed(&x, r.system)
	for _, m := range r.msgs {
		x.mark(m.role[0])
		feed(&x, m.text)
	}
	x.take()
	return x.out
}

// streamHasher is FNV-1a over a stream that takes a snapshot at each cut.
type streamHasher struct {
	h    uint64
	n    int
	cuts []int
	out  []uint64
}

const fnvPrime64 = 1099511628211

func (x *streamHasher) done() bool { return len(x.out) == len(x.cuts) }

// take snapshots every cut reached.
func (x *streamHasher) take() {
	for !x.done() && x.cuts[len(x.out)] <= x.n {
		x.out = append(x.out, x.h)
	}
}

// mark starts a part: a cut at the boundary is taken before it.
func (x *streamHasher) mark(b byte) {
	x.take()
	x.h = (x.h ^ uint64(b)) * fnvPrime64
}

func feed[T string | []byte](x *streamHasher, s T) {
	for i := 0; i < len(s) && !x.done(); i++ {
		x.h = (x.h ^ uint64(s[i])) * fnvPrime64
		x.n++
		if x.cuts[len(x.out)] == x.n {
			x.take()
		}
	}
}

// anthropicMinTokens is the minimum cacheable prefix of model.
func (s *Server) anthropicMinTokens(model string) int {
	if m := s.cfg.Cache.AnthropicMinTokens; m > 0 {
		return m
	}
	if strings.Contains(strings.ToLower(model), "haiku") {
		return AnthropicHaikuCacheMinTokens
	}
	return AnthropicCacheMinTokens
}

// cache applies the provider's prompt-cache rules to a request at now:
// it reads what is cached (unless hit is false: a batch request that the
// draw of Config.Batch.CacheHitProb left without a read) and writes what
// the rules write.
func (s *Server) cache(provider string, r *chatReq, now time.Time, hit bool) cacheUse {
	if s.cfg.Cache.Off {
		return cacheUse{}
	}
	var u cacheUse
	switch provider {
	case "openai":
		u = s.openAICache(r, now, hit)
	case "anthropic":
		u = s.anthropicCache(r, now, hit)
	}
	s.prompts.count(u)
	return u
}

// openAICache: automatic for prompts of at least OpenAICacheMinTokens; the
// longest cached prefix, in whole OpenAICacheIncrement steps, is read, and
// every step of this prompt is written. prompt_cache_key scopes it.
func (s *Server) openAICache(r *chatReq, now time.Time, hit bool) cacheUse {
	const step = OpenAICacheIncrement * 4 // bytes: a token is 4 bytes
	total := cacheStreamLen(r)
	first, last := OpenAICacheMinTokens/OpenAICacheIncrement, total/step
	if tokens(total) < OpenAICacheMinTokens || last < first {
		return cacheUse{}
	}
	cuts := make([]int, 0, last-first+1)
	for k := first; k <= last; k++ {
		cuts = append(cuts, k*step)
	}
	hs := prefixHashes(hashStrings("openai", r.model, r.cacheKey), r, cuts)
	ttl := s.cfg.Cache.TTL
	if r.cacheTTL > ttl {
		ttl = r.cacheTTL
	}
	c := &s.prompts
	c.mu.Lock()
	defer c.mu.Unlock()
	read := 0
	if hit {
		// Every step of a prompt is written together and a read refreshes
		// the shorter ones, so the cached steps are a run from the first.
		for i, h := range hs {
			if !c.lookup(prefixKey{h, cuts[i]}, now) {
				break
			}
			read = cuts[i] / 4
		}
	}
	for i, h := range hs {
		c.put(prefixKey{h, cuts[i]}, now, ttl)
	}
	return cacheUse{read: read}
}

// anthropicCache: only prefixes that end at a cache_control breakpoint and
// hold at least the model's minimum are cached. The longest cached prefix
// at a breakpoint or at one of the anthropicLookback block boundaries
// before one is read; the breakpoints after it are written (1-hour ones
// first, as Anthropic bills a mix of TTLs).
func (s *Server) anthropicCache(r *chatReq, now time.Time, hit bool) cacheUse {
	if len(r.bounds) == 0 {
		return cacheUse{}
	}
	minTok := s.anthropicMinTokens(r.model)
	base := len(r.schema)
	eligible := func(off int) bool { return off > 0 && tokens(off) >= minTok }
	// Candidate reads and the writes, as absolute offsets.
	var cuts []int
	seen := map[int]bool{}
	lastBP := -1
	for j, b := range r.bounds {
		if !b.bp || !eligible(base+b.off) {
			continue
		}
		lastBP = j
		for i := max(0, j-anthropicLookback+1); i <= j; i++ {
			if off := base + r.bounds[i].off; eligible(off) && !seen[off] {
				seen[off] = true
				cuts = append(cuts, off)
			}
		}
	}
	if lastBP < 0 {
		return cacheUse{}
	}
	// Bounds are in order, so cuts are too, but a lookback window can reach
	// back before the previous breakpoint's: sort the few of them.
	sortInts(cuts)
	hs := prefixHashes(hashStrings("anthropic", r.model), r, cuts)
	key := make(map[int]prefixKey, len(cuts))
	for i, off := range cuts {
		key[off] = prefixKey{hs[i], off}
	}
	c := &s.prompts
	c.mu.Lock()
	defer c.mu.Unlock()
	a := 0 // the longest prefix read
	if hit {
		for i := len(cuts) - 1; i >= 0; i-- {
			if c.lookup(key[cuts[i]], now) {
				a = cuts[i]
				break
			}
		}
	}
	u := cacheUse{read: tokens(a)}
	b := a // the last 1-hour breakpoint written
	for _, bd := range r.bounds[:lastBP+1] {
		off := base + bd.off
		if !bd.bp || !eligible(off) || off <= a {
			continue
		}
		ttl := s.cfg.Cache.TTL
		if bd.ttl > 0 {
			ttl = bd.ttl
		}
		c.put(key[off], now, ttl)
		if bd.ttl >= time.Hour {
			b = max(b, off)
		}
	}
	if last := base + r.bounds[lastBP].off; last > a {
		u.write1h = tokens(b) - tokens(a)
		u.write5m = tokens(last) - tokens(b)
	}
	return u
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
