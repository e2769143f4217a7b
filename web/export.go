package web

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/internal/csvcell"
	"github.com/fixpoint-dev/fixpoint/store"
)

// exportRecord is one line of a JSONL export.
type exportRecord struct {
	ID              string          `json:"id"`
	RowNo           int             `json:"row_no"`
	Status          string          `json:"status"`
	FinalClass      string          `json:"final_class,omitempty"`
	Model           string          `json:"model"`
	Attempts        int             `json:"attempts"`
	RepairedLocally bool            `json:"repaired_locally"`
	CostUSD         float64         `json:"cost_usd"`
	WallMS          int64           `json:"wall_ms"`
	Error           string          `json:"error,omitempty"`
	Input           json.RawMessage `json:"input"`
	Value           json.RawMessage `json:"value"`
}

var csvHeader = []string{"id", "row_no", "status", "final_class", "model", "attempts", "repaired_locally",
	"cost_usd", "wall_ms", "error", "input", "value"}

// unsafeFileChars are replaced in the download's file name.
var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// export streams the filtered job list of a batch as CSV or JSONL (by the
// path's extension), every job matching, in row order.
func (h *handler) export(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	jsonl := strings.HasSuffix(r.URL.Path, ".jsonl")
	qctx, cancel := h.queryCtx(r)
	_, err = h.st.Overview(qctx, name)
	cancel()
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ExportTimeout)
	defer cancel()
	ext, ctype := "csv", "text/csv; charset=utf-8"
	if jsonl {
		ext, ctype = "jsonl", "application/x-ndjson"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", unsafeFileChars.ReplaceAllString(name, "_")+"-jobs."+ext))
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriterSize(w, 64<<10)
	var write func(store.JobRow) error
	if jsonl {
		enc := json.NewEncoder(bw)
		write = func(j store.JobRow) error {
			value := j.Value
			if value == nil {
				value = json.RawMessage("null")
			}
			return enc.Encode(exportRecord{ID: j.ID, RowNo: j.RowNo, Status: j.Status, FinalClass: j.FinalClass, Model: j.Model,
				Attempts: j.Attempts, RepairedLocally: j.RepairedLocally, CostUSD: j.CostUSD, WallMS: j.WallMS,
				Error: j.Error, Input: j.Metadata, Value: value})
		}
	} else {
		cw := csv.NewWriter(bw)
		if err := cw.Write(csvHeader); err != nil {
			return
		}
		write = func(j store.JobRow) error {
			// Text cells are escaped against formulas as report export
			// escapes them: a model's reply or an input row starting with
			// = runs nothing in a spreadsheet.
			t := csvcell.Text
			err := cw.Write([]string{t(j.ID), strconv.Itoa(j.RowNo), t(j.Status), t(j.FinalClass), t(j.Model), strconv.Itoa(j.Attempts),
				strconv.FormatBool(j.RepairedLocally), strconv.FormatFloat(j.CostUSD, 'f', -1, 64),
				strconv.FormatInt(j.WallMS, 10), t(j.Error), t(string(j.Metadata)), t(string(j.Value))})
			cw.Flush()
			return err
		}
	}
	if err := h.st.JobList(ctx, name, f, write); err != nil {
		// The status line is sent: the connection is cut without the
		// response's end, so that the download fails rather than look
		// whole.
		h.cfg.Logger.Warn("dashboard: export ended early", "batch", name, "err", err)
		panic(http.ErrAbortHandler)
	}
	_ = bw.Flush()
}
