package extract

import (
	"encoding/json"
	"strconv"
	"strings"
)

// DuplicateKey reports the first object member in text, a valid JSON value,
// whose key an earlier member of the same object already has: its pointer
// (RFC 6901) and the key. JSON decoders (encoding/json, Postgres's jsonb)
// keep the last of the two values and say nothing, so {"c":"bug","c":"billing"}
// would be read as "billing" and "bug" lost unseen: which one was meant is
// not for a reader to guess.
//
// It scans bytes rather than tokens: a valid line needs no error handling,
// and the encoding/json token API would cost more than decoding the row.
func DuplicateKey(text []byte) (pointer, key string, dup bool) {
	var stack []keyFrame
	expectKey := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '{':
			stack = append(stack, keyFrame{object: true})
			expectKey = true
		case '[':
			stack = append(stack, keyFrame{})
			expectKey = false
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				expectKey = true
			} else {
				top.index++
			}
		case '"':
			end := i + 1
			escaped := false
			for ; end < len(text); end++ {
				if text[end] == '\\' {
					escaped = true
					end++
					continue
				}
				if text[end] == '"' {
					break
				}
			}
			if expectKey {
				k := string(text[i+1 : end])
				if escaped {
					var s string
					if err := json.Unmarshal(text[i:end+1], &s); err == nil {
						k = s
					}
				}
				top := &stack[len(stack)-1]
				if top.keys == nil {
					top.keys = map[string]bool{}
				}
				if top.keys[k] {
					return pointerOf(stack[:len(stack)-1]) + "/" + escapePointer(k), k, true
				}
				top.keys[k] = true
				top.key = k
				expectKey = false
			}
			i = end
		}
	}
	return "", "", false
}

// keyFrame is an object or array duplicateKey is inside.
type keyFrame struct {
	object bool
	keys   map[string]bool
	index  int    // the array element being read
	key    string // the object member being read
}

// pointerOf joins the members and elements the frames are reading into a
// JSON pointer.
func pointerOf(frames []keyFrame) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteByte('/')
		if f.object {
			b.WriteString(escapePointer(f.key))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(s string) string { return pointerEscaper.Replace(s) }
