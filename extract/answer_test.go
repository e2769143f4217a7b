package extract

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLabelledAt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reply string
		want  bool
	}{
		{"Answer: {\"a\":1}", true},
		{"**Final JSON:**\n```json\n{\"a\":1}", true},
		{"Wait, that is wrong. Corrected: {\"a\":1}", true},
		{"答案：{\"a\":1}", true},
		{"Example output: {\"a\":1}", false},
		{"Output format: {\"a\":1}", false},
		{"I set {\"a\":1}", false},
		{"Here you go: {\"a\":1}", true},
	}
	for _, tt := range tests {
		at := len(tt.reply) - len(`{"a":1}`)
		if got := LabelledAt(tt.reply, at); got != tt.want {
			t.Errorf("LabelledAt(%q) = %v, want %v", tt.reply, got, tt.want)
		}
	}
}

func TestCitation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reply string
		want  bool
	}{
		{"The answer is [1, 2] as shown in [3]", true},
		{"The answer is [1, 2], see [3]", true},
		{"The answer is [1, 2] and [3]", false},
		{"Smith et al. [12]", true},
	}
	for _, tt := range tests {
		cands, _ := Extract(tt.reply)
		last := &cands[len(cands)-1]
		if got := Citation(tt.reply, last); got != tt.want {
			t.Errorf("Citation(%q) of %s = %v, want %v", tt.reply, last.JSON, got, tt.want)
		}
	}
}

func TestSameValueAndAnswer(t *testing.T) {
	t.Parallel()
	dec := func(s string) any {
		var v any
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !SameValue(dec(`{"a":[1.0,"x"],"b":null}`), dec(`{"b":null,"a":[1e0,"x"]}`)) {
		t.Error("numbers by value and members in any order are one value")
	}
	if SameValue(dec(`[1,2]`), dec(`[2,1]`)) {
		t.Error("arrays in another order are another value")
	}
	if !SameAnswer(dec(`{"a":1,"b":2}`), dec(`{"a":3}`)) {
		t.Error("an object sharing a key and saying something else is the same answer")
	}
	if SameAnswer(dec(`{"a":1,"b":2}`), dec(`{"a":1}`)) {
		t.Error("repeating some members is not another answer")
	}
	if !SameAnswer(dec(`[1,2]`), dec(`[3.5]`)) || SameAnswer(dec(`[1]`), dec(`["1"]`)) {
		t.Error("arrays are the same answer when their first items are of one JSON type")
	}
}
