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
// It scans bytes rather than tokens: a valid value needs no error handling,
// and the encoding/json token API would cost more than decoding the value.
// Keys are compared in place, so a key without escapes costs no allocation
// (in an object of up to manyKeys members).
func DuplicateKey(text []byte) (pointer, key string, dup bool) {
	var (
		stackBuf  [16]keyFrame
		keysBuf   [32]keyText
		stack     = stackBuf[:0]
		keys      = keysBuf[:0] // the keys of the open objects, innermost last
		expectKey bool
	)
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '{':
			stack = append(stack, keyFrame{object: true, first: len(keys)})
			expectKey = true
		case '[':
			stack = append(stack, keyFrame{first: len(keys)})
			expectKey = false
		case '}', ']':
			keys = keys[:stack[len(stack)-1].first]
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				expectKey = true
			} else {
				top.index++
			}
		case '"':
			end, escaped := i+1, false
			for ; end < len(text) && text[end] != '"'; end++ {
				if text[end] == '\\' {
					escaped = true
					end++
				}
			}
			if expectKey {
				k := keyText{raw: text[i+1 : end]}
				if escaped {
					k = unescapeKey(text[i:end+1], k)
				}
				top := &stack[len(stack)-1]
				if top.seen(keys[top.first:], k) {
					return pointerOf(stack, keys) + "/" + escapePointer(k.String()), k.String(), true
				}
				keys = append(keys, k)
				expectKey = false
			}
			i = end
		}
	}
	return "", "", false
}

// unescapeKey returns the key of quoted, a JSON string with escapes, as
// text (raw unless it decodes).
func unescapeKey(quoted []byte, raw keyText) keyText {
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return raw
	}
	return keyText{unescaped: s}
}

// keyText is a key as written (raw), or unescaped when written with escapes.
type keyText struct {
	raw       []byte
	unescaped string
}

func (k keyText) equal(o keyText) bool {
	switch {
	case k.raw != nil && o.raw != nil:
		return string(k.raw) == string(o.raw) // compared without a copy
	case k.raw != nil:
		return string(k.raw) == o.unescaped
	case o.raw != nil:
		return k.unescaped == string(o.raw)
	}
	return k.unescaped == o.unescaped
}

func (k keyText) String() string {
	if k.raw != nil {
		return string(k.raw)
	}
	return k.unescaped
}

// keyFrame is an object or array DuplicateKey is inside.
type keyFrame struct {
	object bool
	first  int             // where the object's keys start in the shared list
	index  int             // the array element being read
	set    map[string]bool // the keys, once the object has many
}

// manyKeys is where an object's keys go into a map rather than being
// compared one by one.
const manyKeys = 32

// seen reports whether k is among the object's keys so far (own).
func (f *keyFrame) seen(own []keyText, k keyText) bool {
	if f.set == nil && len(own) < manyKeys {
		for _, o := range own {
			if o.equal(k) {
				return true
			}
		}
		return false
	}
	if f.set == nil {
		f.set = make(map[string]bool, 2*len(own))
		for _, o := range own {
			f.set[o.String()] = true
		}
	}
	if f.set[k.String()] {
		return true
	}
	f.set[k.String()] = true
	return false
}

// pointerOf joins the members and elements the frames but the innermost are
// reading into a JSON pointer: an object's member is the last key it had
// when the next frame opened.
func pointerOf(frames []keyFrame, keys []keyText) string {
	var b strings.Builder
	for i, f := range frames[:len(frames)-1] {
		b.WriteByte('/')
		if f.object {
			b.WriteString(escapePointer(keys[frames[i+1].first-1].String()))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(s string) string { return pointerEscaper.Replace(s) }
