package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// anthropicSchema keeps what structured outputs accept, drops the rest
// (listing it), closes every object, and refuses what they cannot take at
// all: the request then forces a tool.
func TestAnthropicSchema(t *testing.T) {
	t.Parallel()
	many := func(n int) string {
		var props []string
		for i := range n {
			props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
		}
		return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	}
	for _, tc := range []struct {
		name, in, want string
		dropped        []string
		ok             bool
	}{
		{"kept as it is, closed", `{"type":"object","properties":{"d":{"type":"string","format":"date"},"l":{"type":"array","items":{"enum":["a",1,null]},"minItems":1}},"required":["d"]}`,
			`{"type":"object","properties":{"d":{"type":"string","format":"date"},"l":{"type":"array","items":{"enum":["a",1,null]},"minItems":1}},"required":["d"],"additionalProperties":false}`, nil, true},
		{"bounds, lengths and patterns past its regular expressions dropped", `{"type":"object","properties":{"n":{"type":"integer","minimum":0,"multipleOf":2},"s":{"type":"string","pattern":"^(?!io)","maxLength":3,"format":"regex"},"b":{"type":"string","pattern":"(a)\\1"},"k":{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$","default":"ABC-0000"},"l":{"type":"array","minItems":2,"uniqueItems":true}},"additionalProperties":true}`,
			`{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"b":{"type":"string"},"k":{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$","default":"ABC-0000"},"l":{"type":"array"}},"additionalProperties":false}`,
			[]string{"/additionalProperties", "/properties/b/pattern", "/properties/l/minItems", "/properties/l/uniqueItems", "/properties/n/minimum", "/properties/n/multipleOf", "/properties/s/format", "/properties/s/maxLength", "/properties/s/pattern"}, true},
		{"oneOf as anyOf, an enum of objects dropped, local keywords left out unsaid", `{"type":"object","x-fixpoint-rules":[],"properties":{"v":{"oneOf":[{"type":"string"},{"type":"null"}]},"e":{"enum":[{"a":1}]}}}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"null"}]},"e":{}},"additionalProperties":false}`,
			[]string{"/properties/e/enum", "/properties/v/oneOf"}, true},
		{"a reference that is not recursive", `{"type":"object","$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
			`{"type":"object","$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}},"additionalProperties":false},"b":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}},"additionalProperties":false}`, nil, true},
		{"recursive through $defs", `{"type":"object","$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/m"}}},"m":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"properties":{"head":{"$ref":"#/$defs/n"}}}`, "", nil, false},
		{"recursive through the root", `{"type":"object","properties":{"child":{"$ref":"#"}}}`, "", nil, false},
		{"a reference outside the document", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "", nil, false},
		{"24 optional properties", many(24), "", nil, true},
		{"25 optional properties, over the limit", many(25), "", nil, false},
	} {
		out, dropped, ok, err := anthropicSchema(json.RawMessage(tc.in))
		if err != nil || ok != tc.ok {
			t.Errorf("%s: ok %v, err %v; want ok %v", tc.name, ok, err, tc.ok)
			continue
		}
		if !ok || tc.want == "" {
			continue
		}
		var got, want any
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal([]byte(tc.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, out, tc.want)
		}
		if !reflect.DeepEqual(dropped, tc.dropped) {
			t.Errorf("%s: dropped %v, want %v", tc.name, dropped, tc.dropped)
		}
	}
}

// Models before structured outputs, by alias or snapshot, get a tool;
// the 4.5 models and any model fixpoint does not know get output_config.
func TestAnthropicStructured(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]bool{
		"claude-3-5-haiku-latest": false, "claude-3-7-sonnet-20250219": false, "claude-sonnet-4-20250514": false,
		"claude-sonnet-4-0": false, "claude-opus-4-1": false, "claude-opus-4-1-20250805": false, "claude-opus-4": false,
		"claude-sonnet-4-5": true, "claude-sonnet-4-5-20250929": true, "claude-haiku-4-5": true, "claude-opus-4-6": true,
		"claude-opus-5": true, "sim-typical": true,
	} {
		if got := anthropicStructured(model); got != want {
			t.Errorf("%s: structured outputs %v, want %v", model, got, want)
		}
	}
}

// A json_schema batch result on Anthropic lists the keywords output_config
// left out, as the realtime reply to the same request does.
func TestAnthropicBatchResultDropsAsRealtime(t *testing.T) {
	t.Parallel()
	reply := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"{\"name\":\"Ada\"}"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":4}}`
	req := fixpoint.Request{Model: "claude-sonnet-4-5", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}},
		Mode: fixpoint.ModeJSONSchema, Schema: batchTestSchema}
	rec := newRecorder(t, replyJSON(200, reply))
	want, err := batchTestClient(t, ProviderAnthropic, rec.srv.URL).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	line := `{"custom_id":"c-1","result":{"type":"succeeded","message":` + reply + `}}`
	rp := newBatchReplay(t, map[string][]bEntry{"anthropic.batches.results": {{body: line}}})
	got := collect(t, batchTestClient(t, ProviderAnthropic, rp.srv.URL), BatchStatus{ID: "b", Ended: true}, []BatchItem{{CustomID: "c-1", Request: req}})
	if len(got) != 1 || got[0].Response == nil {
		t.Fatalf("got %+v", got)
	}
	if d := []string{"/properties/name/minLength"}; !reflect.DeepEqual(want.DroppedKeywords, d) || !reflect.DeepEqual(got[0].Response.DroppedKeywords, d) {
		t.Errorf("dropped: realtime %v, batch %v; want %v", want.DroppedKeywords, got[0].Response.DroppedKeywords, d)
	}
}
