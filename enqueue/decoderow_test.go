package enqueue

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decodeRow reads lines with the hot path's decoder: every line gives the
// row encoding/json gives, or encoding/json's error, and the row's JSON
// (a job's metadata) is encoding/json's too, byte for byte.
func TestDecodeRowAsEncodingJSON(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"a":"\ud800 lone","b":"\udc00\ud800","c":"caf\u00e9 <b> & \u2028","d":1e400,"e":-0.0,"f":[1,{"x":null}],"g":true}`,
		`{"n":12345678901234567890123,"s":"\t\"\\/","m":1.50,"neg":-12e-3}`,
		`{"a":"\ud83d\ude00","b":"\ud83dX","o":{"z":{"y":[[],{}]}}}`,
		`{}`, `{"a":1} `, `{"a":1}{"b":2}`, `{"a":1} x`, `{"a":1} 2`, `null`, `{"a":1,}`, `{"a":01}`,
		`{"a":NaN}`, `{"a":'x'}`, `{"a":"\x"}`, `{"a":"tab	in"}`, `{"a":+1}`, `{"a":.5}`, `{"a":1.}`,
		`{a:1}`, `{"a":1`, `{"a":[1,2}`, `{"a":tru}`, `{"a":"\u12"}`, `{"a":1 "b":2}`, `{"a":-}`, `{"a":1e}`,
	}
	for _, line := range lines {
		got, gotErr := decodeRow([]byte(line), 0)
		var want map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(line)))
		dec.UseNumber()
		wantErr := dec.Decode(&want)
		if wantErr == nil && (want == nil || dec.More()) {
			wantErr = errNotOne
		}
		switch {
		case (gotErr != nil) != (wantErr != nil):
			t.Errorf("%s: decodeRow error %v, encoding/json %v", line, gotErr, wantErr)
		case gotErr == nil && !reflect.DeepEqual(got, want):
			t.Errorf("%s: decodeRow %#v, encoding/json %#v", line, got, want)
		case gotErr == nil:
			a, _ := json.Marshal(want)
			b, err := marshalRow(got)
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s: row JSON %s (%v), encoding/json writes %s", line, b, err, a)
			}
		}
	}
}

var errNotOne = errorString("not one object")

type errorString string

func (e errorString) Error() string { return string(e) }
