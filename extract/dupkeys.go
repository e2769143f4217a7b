package extract

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
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
	w := walkers.Get().(*walker)
	defer func() {
		// It keeps nothing of text.
		clear(w.keysBuf[:])
		clear(w.stackBuf[:])
		walkers.Put(w)
	}()
	w.walk(text, func(i, end int, isKey, escaped bool) bool {
		if !isKey {
			return false
		}
		k := keyText{raw: text[i+1 : end]}
		if escaped {
			k = unescapeKey(text[i:end+1], k)
		}
		top := &w.stack[len(w.stack)-1]
		if top.seen(w.keys[top.first:], k) {
			pointer, key, dup = pointerOf(w.stack, w.keys)+"/"+PointerToken(k.String()), k.String(), true
			return true
		}
		w.keys = append(w.keys, k)
		return false
	})
	return pointer, key, dup
}

// LoneSurrogate reports the first string or key in text, a valid JSON
// value, that holds a \u escape of half a UTF-16 surrogate pair without its
// other half ("\ud800"): its pointer. JSON decoders (encoding/json, the
// schema library's) read it as U+FFFD without a word, so "\udc00" and
// "\udc01" become one key, and the value stored is not the one written.
// inKey says it is in a key; pointer is then the object holding the key.
func LoneSurrogate(text []byte) (pointer string, inKey, found bool) {
	var w walker
	w.walk(text, func(i, end int, isKey, escaped bool) bool {
		if isKey {
			w.keys = append(w.keys, keyText{raw: text[i+1 : end]}) // the pointer needs it
		}
		if !escaped || !loneSurrogate(text[i+1:end]) {
			return false
		}
		if isKey {
			pointer = pointerOf(w.stack, w.keys) // the object holding it
		} else {
			pointer = w.at()
		}
		inKey, found = isKey, true
		return true
	})
	return pointer, inKey, found
}

// loneSurrogate reports whether s, a JSON string's text between its quotes,
// has a \uD800-\uDFFF escape that is not a high half followed by a low one.
func loneSurrogate(s []byte) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' || i+6 > len(s) {
			i++
			continue
		}
		r, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
		switch {
		case err != nil || r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00:
			return true // a low half with no high half before it
		case i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u':
			return true
		default:
			lo, err := strconv.ParseUint(string(s[i+8:i+12]), 16, 32)
			if err != nil || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

// walker walks a valid JSON value's bytes, keeping the containers it is
// in and the keys of the open objects (which its visitor appends).
// walkers keeps walkers between calls: a walker is 2 KB, which a call
// made for every row of a dataset allocated each time (its buffers point
// into itself, so it does not stay on the stack).
var walkers = sync.Pool{New: func() any { return new(walker) }}

type walker struct {
	stackBuf [16]keyFrame
	keysBuf  [32]keyText
	stack    []keyFrame
	keys     []keyText // the keys of the open objects, innermost last
}

// walk calls visit for each string of text, quotes at i and end, saying
// whether it is an object key and has escapes; visit returns true to stop.
// It scans bytes rather than tokens: a valid value needs no error
// handling, and the encoding/json token API would cost more than decoding.
func (w *walker) walk(text []byte, visit func(i, end int, isKey, escaped bool) bool) {
	w.stack, w.keys = w.stackBuf[:0], w.keysBuf[:0]
	expectKey := false
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '{':
			w.stack = append(w.stack, keyFrame{object: true, first: len(w.keys)})
			expectKey = true
		case '[':
			w.stack = append(w.stack, keyFrame{first: len(w.keys)})
			expectKey = false
		case '}', ']':
			w.keys = w.keys[:w.stack[len(w.stack)-1].first]
			w.stack = w.stack[:len(w.stack)-1]
		case ',':
			if top := &w.stack[len(w.stack)-1]; top.object {
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
			if visit(i, end, expectKey, escaped) {
				return
			}
			expectKey = false
			i = end
		}
	}
}

// at is the pointer of the value being read: the members and elements of
// every open container.
func (w *walker) at() string {
	if len(w.stack) == 0 {
		return ""
	}
	return pointerOf(append(w.stack, keyFrame{first: len(w.keys)}), w.keys)
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
			b.WriteString(PointerToken(keys[frames[i+1].first-1].String()))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// PointerToken escapes s as one token of a JSON pointer (RFC 6901).
func PointerToken(s string) string { return pointerEscaper.Replace(s) }
