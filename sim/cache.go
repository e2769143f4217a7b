package sim

import "sync"

// rawCache keeps what a server makes from bytes a batch sends again and
// again (a schema, a system prompt with the schema in it), keyed by the
// bytes themselves: a lookup copies nothing. The zero value is ready; it
// stops growing at the max its callers pass (later keys are made each time).
type rawCache[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

// get returns make(key), from the cache when key was seen before.
func (c *rawCache[V]) get(key []byte, max int, make func([]byte) V) V {
	c.mu.RLock()
	v, ok := c.m[string(key)]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = make(key)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]V{}
	}
	if len(c.m) < max {
		c.m[string(key)] = v
	}
	c.mu.Unlock()
	return v
}
