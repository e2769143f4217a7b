package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// Live progress: a page that shows running batches opens a server-sent
// event stream; the stream reads the ledger every PollInterval (one query,
// bounded by QueryTimeout), sends each batch's rendered part when it
// changed, and a "done" event when none is running any more (the page's
// sse-close ends the stream then). At most MaxStreams streams are open at
// once, ClientStreams of them one client's, each for at most StreamMaxAge.

// liveBatchesMax bounds the batches one stream follows.
const liveBatchesMax = 50

// eventName is the SSE event carrying a batch's part. Batch names may hold
// any character; event names are kept to [a-z0-9].
func eventName(batch string) string {
	sum := sha256.Sum256([]byte(batch))
	return "b" + hex.EncodeToString(sum[:8])
}

func liveQuery(names []string) string {
	q := url.Values{"b": names}
	return q.Encode()
}

// batchesEvents streams the rows of the batch list's running batches
// (?b=NAME, repeated).
func (h *handler) batchesEvents(w http.ResponseWriter, r *http.Request) {
	names := r.URL.Query()["b"]
	if len(names) == 0 || len(names) > liveBatchesMax {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: give 1 to %d batches as ?b=NAME", store.ErrInvalid, liveBatchesMax))
		return
	}
	h.stream(w, r, names, "batches", "row")
}

// batchEvents streams the progress part of one batch's page.
func (h *handler) batchEvents(w http.ResponseWriter, r *http.Request) {
	h.stream(w, r, []string{r.PathValue("name")}, "batch", "progress")
}

// stream polls the overviews of names and sends each one's part (template
// part of page) when it changed.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, names []string, page, part string) {
	ctx, rc, done, ok := h.openStream(w, r)
	if !ok {
		return
	}
	defer done()
	last := map[string]string{}
	tick := time.NewTicker(h.cfg.PollInterval)
	defer tick.Stop()
	failing := false
	for {
		running, err := h.poll(ctx, w, names, page, part, last)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			// Said to the page, which keeps its last figures; the next
			// poll tries again.
			failing = true
			if writeEvent(w, "ledger-error", "<span class=\"warn\">ledger unreachable: "+template.HTMLEscapeString(err.Error())+"</span>") != nil {
				return
			}
		case failing:
			failing = false
			if writeEvent(w, "ledger-error", "") != nil {
				return
			}
		}
		if err == nil && !running {
			_ = writeEvent(w, "done", "done")
			_ = rc.Flush()
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// openStream takes one of the MaxStreams places (or answers 503) and one
// of the client's ClientStreams places (or answers 429), and starts an
// event stream that ends after StreamMaxAge; done gives the places back.
func (h *handler) openStream(w http.ResponseWriter, r *http.Request) (ctx context.Context, rc *http.ResponseController, done func(), ok bool) {
	select {
	case h.streams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "10")
		h.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("%d live streams are open already", h.cfg.MaxStreams))
		return nil, nil, nil, false
	}
	client := clientKey(r.RemoteAddr)
	if !h.clients.take(client) {
		<-h.streams
		w.Header().Set("Retry-After", "10")
		h.fail(w, r, http.StatusTooManyRequests, fmt.Errorf("this client (%s) holds %d live streams already, the most one may: close a dashboard page that follows a running batch or a try, or wait for one of its streams to end", client, h.cfg.ClientStreams))
		return nil, nil, nil, false
	}
	rc = http.NewResponseController(w)
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StreamMaxAge)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A deadline on the whole response would cut the stream: the server's
	// WriteTimeout, if any, is lifted for it.
	_ = rc.SetWriteDeadline(time.Time{})
	return ctx, rc, func() { cancel(); <-h.streams; h.clients.give(client) }, true
}

// clientStreams counts the streams each client holds open.
type clientStreams struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

// take counts a stream of client, or says it holds max already.
func (c *clientStreams) take(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[client] >= c.max {
		return false
	}
	c.open[client]++
	return true
}

// give uncounts a stream of client.
func (c *clientStreams) give(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[client]--; c.open[client] <= 0 {
		delete(c.open, client)
	}
}

// clientKey is the client a stream is counted to: the remote IP address,
// its /64 for IPv6 (where one host may hold a whole /64).
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// poll sends the parts that changed since last and says whether one of
// the batches is still running.
func (h *handler) poll(ctx context.Context, w io.Writer, names []string, page, part string, last map[string]string) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	bs, err := h.st.Overviews(qctx, names, len(names))
	if err != nil {
		return false, err
	}
	running := false
	for _, b := range bs {
		running = running || b.Running()
		var buf bytes.Buffer
		if err := h.pages[page].ExecuteTemplate(&buf, part, b); err != nil {
			return false, err
		}
		html := buf.String()
		if last[b.Name] == html {
			continue
		}
		last[b.Name] = html
		if err := writeEvent(w, eventName(b.Name), html); err != nil {
			return false, err
		}
	}
	return running, nil
}

// writeEvent writes one server-sent event; data's lines each get their
// "data:" field (a line break inside a field would end it).
func writeEvent(w io.Writer, event, data string) error {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	for _, l := range strings.Split(strings.ReplaceAll(data, "\r", ""), "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
