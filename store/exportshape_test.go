package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

func TestExportShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.NewDB(t)
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	// The body is stored canonical (keys sorted), so properties written
	// zeta-first come back sorted.
	written, err := s.PutSchema(ctx, []byte(`{"type":"object","properties":{"zeta":{},"alpha":{"type":"string"},"mid":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.PutSchema(ctx, []byte(`{"type":"object","properties":{"label":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := s.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	// batch creates a batch with jobs whose inputs are metas, then sets its
	// recorded input_columns and schema_hash (SQL NULL when "").
	batch := func(name, jobHash string, metas []string, cols, batchHash string) {
		t.Helper()
		if err := s.PutBatch(ctx, store.BatchParams{Name: name}); err != nil {
			t.Fatal(err)
		}
		var jobs []store.NewJob
		for i, m := range metas {
			jobs = append(jobs, store.NewJob{ID: fmt.Sprintf("%s-%d", name, i+1), Batch: name, RowNo: i + 1, SchemaHash: jobHash,
				Prompt: "p", Provider: "sim", Model: "m", Mode: "prompt", Strategy: "conversation", Metadata: json.RawMessage(m)})
		}
		if len(jobs) > 0 {
			if _, err := s.InsertJobs(ctx, jobs); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, `UPDATE batches SET input_columns = nullif($2, '')::jsonb, schema_hash = nullif($3, '') WHERE name = $1`,
			name, cols, batchHash); err != nil {
			t.Fatal(err)
		}
	}
	// Recorded columns in file order; rows with keys beyond them.
	batch("recorded", other, []string{`{"zeta":1,"alpha":"a","mid":null}`, `{"zeta":2,"alpha":"b","mid":3,"x2":1,"x1":0}`},
		`["zeta","alpha","mid"]`, written)
	// Nothing recorded: keys of every row sorted, the schema of the jobs.
	batch("legacy", written, []string{`{"b":1}`, `{"c":1,"a":2}`, `{}`}, "", "")
	batch("empty", "", nil, "", "")
	batch("no-properties", bare, []string{`{"a":1}`}, "", "")

	tests := []struct {
		name    string
		batch   string
		want    store.ExportShape
		wantErr error
	}{
		{name: "recorded columns first, then other keys sorted; the batch's schema", batch: "recorded",
			want: store.ExportShape{InputColumns: []string{"zeta", "alpha", "mid", "x1", "x2"}, SchemaHash: written, Properties: []string{"alpha", "mid", "zeta"}}},
		{name: "no recorded columns or schema: sorted keys, the jobs' schema", batch: "legacy",
			want: store.ExportShape{InputColumns: []string{"a", "b", "c"}, SchemaHash: written, Properties: []string{"alpha", "mid", "zeta"}}},
		{name: "a batch with no jobs is not an error", batch: "empty", want: store.ExportShape{}},
		{name: "schema without properties", batch: "no-properties", want: store.ExportShape{InputColumns: []string{"a"}, SchemaHash: bare}},
		{name: "unknown batch", batch: "nope", wantErr: store.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.ExportShape(ctx, tt.batch)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ExportShape(%q) error = %v, want %v", tt.batch, err, tt.wantErr)
			}
			if !slices.Equal(got.InputColumns, tt.want.InputColumns) || got.SchemaHash != tt.want.SchemaHash ||
				!slices.Equal(got.Properties, tt.want.Properties) {
				t.Errorf("ExportShape(%q) = %+v, want %+v", tt.batch, got, tt.want)
			}
		})
	}
}
