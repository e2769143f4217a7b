package fixpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Prompt is a system prompt with what recording it takes, made once per
// prompt: its SHA-256 and its message as JSON.
type Prompt struct {
	text string
	sha  string
	msg  []byte // {"role":"system","content":text}, as json.Marshal writes it
}

// NewPrompt returns the prompt of text; "" is no system prompt.
func NewPrompt(text string) *Prompt {
	if text == "" {
		return &Prompt{}
	}
	msg, _ := json.Marshal(Message{Role: "system", Content: text})
	sum := sha256.Sum256([]byte(text))
	return &Prompt{text: text, sha: hex.EncodeToString(sum[:]), msg: msg}
}

// Text returns the prompt.
func (p *Prompt) Text() string { return p.text }

// SHA256 is the prompt's hash (lowercase hex), "" for no prompt.
func (p *Prompt) SHA256() string { return p.sha }

// MarshalJSON encodes the prompt as its text.
func (p *Prompt) MarshalJSON() ([]byte, error) { return json.Marshal(p.text) }

// Message returns the prompt as the system message the ledger records,
// {"role":"system","content":text} as JSON; nil for no prompt.
func (p *Prompt) Message() []byte { return p.msg }
