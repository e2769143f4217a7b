package sim

import "sync/atomic"

// Transport event names used in Stats.Transport.
const (
	EventRateLimited = "rate_limited" // 429 from the RPM/TPM budget
	EventInjected429 = "injected_429" // 429 from Transport.RateLimited
	EventQuota       = "quota_exhausted"
	EventAuth        = "auth" // 401: a key other than Config.APIKey
	EventStatus500   = "status_500"
	EventStatus503   = "status_503"
	EventStatus529   = "status_529"
	EventHang        = "hang"
	EventTrickle     = "trickle"
	EventReset       = "reset"
	EventMalformed   = "malformed"
	EventHuge        = "huge"
	EventScripted    = "scripted"
	// EventCapacity is a flex call refused for want of capacity
	// (Config.FlexBusy): OpenAI's 429 Resource Unavailable.
	EventCapacity = "flex_capacity"
)

var eventNames = [...]string{
	EventRateLimited, EventInjected429, EventQuota, EventStatus500, EventStatus503, EventStatus529,
	EventHang, EventTrickle, EventReset, EventMalformed, EventHuge, EventScripted, EventAuth, EventCapacity,
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	// Requests counts every call received.
	Requests int64
	// Replies counts model replies sent (status 200 with a completion).
	Replies int64
	// Corrections counts replies to correction turns.
	Corrections int64
	// Patches counts the JSON Patch replies among them (see "Patch
	// replies" in the package documentation).
	Patches int64
	// ByProvider counts calls per wire format: openai, anthropic, ollama.
	ByProvider map[string]int64
	// ByStatus counts responses per HTTP status (0: no response: reset, hang).
	ByStatus map[int]int64
	// Faults counts replies that carry each fault kind (once per reply).
	Faults map[FaultKind]int64
	// Transport counts transport events by name (Event... constants).
	Transport map[string]int64
	// Batch counts the batch endpoints' work. The requests of a batch are
	// not in Replies, Corrections or Faults.
	Batch BatchStats
	// Cache counts the prompt cache's reads and writes, realtime and batch.
	Cache CacheStats
}

// BatchStats counts the batch endpoints' work, both providers together.
type BatchStats struct {
	// FilesUploaded counts OpenAI input files uploaded.
	FilesUploaded int64
	// Created counts batches created, Failed the OpenAI ones among them
	// whose input file did not validate, Ended those that have ended
	// (failed ones included).
	Created, Failed, Ended int64
	// Succeeded, Errored, Expired and Cancelled count the batches'
	// requests by how they ended.
	Succeeded, Errored, Expired, Cancelled int64
}

// CacheStats counts the prompt cache's work.
type CacheStats struct {
	// Hits counts requests that read a cached prefix, ReadTokens the
	// tokens they read (OpenAI cached_tokens, Anthropic
	// cache_read_input_tokens).
	Hits, ReadTokens int64
	// Writes counts Anthropic requests that wrote the cache, WriteTokens
	// their cache_creation_input_tokens. OpenAI's writes are free and not
	// counted.
	Writes, WriteTokens int64
}

type counters struct {
	replies     atomic.Int64
	corrections atomic.Int64
	patches     atomic.Int64
	provider    [3]atomic.Int64
	status      [600]atomic.Int64
	faults      [numFaultKinds]atomic.Int64
	events      [len(eventNames)]atomic.Int64
}

var providerNames = []string{"openai", "anthropic", "ollama"}

func (c *counters) event(name string) {
	for i, n := range eventNames {
		if n == name {
			c.events[i].Add(1)
			return
		}
	}
}

func (c *counters) statusCode(code int) {
	if code >= 0 && code < len(c.status) {
		c.status[code].Add(1)
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	st := Stats{
		Requests:    s.calls.Load(),
		Replies:     c.replies.Load(),
		Corrections: c.corrections.Load(),
		Patches:     c.patches.Load(),
		ByProvider:  map[string]int64{},
		ByStatus:    map[int]int64{},
		Faults:      map[FaultKind]int64{},
		Transport:   map[string]int64{},
	}
	b := &s.batches
	st.Batch = BatchStats{FilesUploaded: b.uploaded.Load(), Created: b.created.Load(), Failed: b.failed.Load(),
		Ended: b.ended.Load(), Succeeded: b.succeeded.Load(), Errored: b.errored.Load(), Expired: b.expired.Load(),
		Cancelled: b.cancelled.Load()}
	p := &s.prompts
	st.Cache = CacheStats{Hits: p.hits.Load(), ReadTokens: p.reads.Load(), Writes: p.writers.Load(), WriteTokens: p.written.Load()}
	for i, n := range providerNames {
		if v := c.provider[i].Load(); v != 0 {
			st.ByProvider[n] = v
		}
	}
	for i := range c.status {
		if v := c.status[i].Load(); v != 0 {
			st.ByStatus[i] = v
		}
	}
	for i, k := range allFaultKinds {
		if v := c.faults[i].Load(); v != 0 {
			st.Faults[k] = v
		}
	}
	for i, n := range eventNames {
		if v := c.events[i].Load(); v != 0 {
			st.Transport[n] = v
		}
	}
	return st
}
