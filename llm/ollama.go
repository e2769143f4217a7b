package llm

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// Ollama /api/chat wire types (only the fields we send or read).

type olRequest struct {
	Model    string             `json:"model"`
	Messages []fixpoint.Message `json:"messages"`
	Stream   bool               `json:"stream"`
	Format   json.RawMessage    `json:"format,omitempty"`
	Tools    []oaTool           `json:"tools,omitempty"`
	Options  *olOptions         `json:"options,omitempty"`
}

type olOptions struct {
	Temperature *float64 `json:"temperature,omitempty"`
	NumPredict  int      `json:"num_predict,omitempty"`
}

type olResponse struct {
	Model   string `json:"model"`
	Message struct {
		Content   string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool       `json:"done"`
	DoneReason      string     `json:"done_reason"`
	PromptEvalCount tokenCount `json:"prompt_eval_count"`
	EvalCount       tokenCount `json:"eval_count"`
}

// usage is w's usage as fixpoint counts it, and the counts that could not
// be read.
func (w *olResponse) usage() (fixpoint.Usage, string) {
	return fixpoint.Usage{InputTokens: w.PromptEvalCount.n, OutputTokens: w.EvalCount.n},
		unreadCounts(namedCount{"prompt_eval_count", w.PromptEvalCount}, namedCount{"eval_count", w.EvalCount})
}

// encodeOllama builds the /api/chat body: stream false; in ModeJSONSchema
// format is the full schema (Ollama ignores keywords its grammar does not
// support); ModePrompt sends no format, so the answer is parsed from text
// as with every provider. ModeTool offers one tool; Ollama cannot force a
// tool call, so a text answer is returned as text.
func (c *Client) encodeOllama(req *fixpoint.Request) ([]byte, error) {
	w := olRequest{Model: req.Model, Stream: false}
	w.Messages = make([]fixpoint.Message, 0, len(req.Messages)+1)
	if req.System != "" {
		w.Messages = append(w.Messages, fixpoint.Message{Role: "system", Content: req.System})
	}
	w.Messages = append(w.Messages, req.Messages...)
	switch req.Mode {
	case fixpoint.ModeJSONSchema:
		w.Format = req.Schema
	case fixpoint.ModeTool:
		w.Tools = []oaTool{{Type: "function", Function: oaFunction{
			Name: schemaName(req), Description: toolDescription, Parameters: req.Schema}}}
	}
	if req.Temperature != nil || req.MaxTokens > 0 {
		w.Options = &olOptions{Temperature: req.Temperature, NumPredict: req.MaxTokens}
	}
	return json.Marshal(&w)
}

// decodeOllama reads a 2xx /api/chat body.
func decodeOllama(body []byte, req *fixpoint.Request, out *fixpoint.Response) error {
	var w olResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("decode chat: %w", briefDecodeError(err))
	}
	if !w.Done {
		return fmt.Errorf("decode chat: done is false (streamed reply?)")
	}
	out.Model = w.Model
	out.Text = w.Message.Content
	switch w.DoneReason {
	case "stop", "":
		out.FinishReason = fixpoint.FinishStop
	case "length":
		out.FinishReason = fixpoint.FinishLength
	default:
		out.FinishReason = fixpoint.FinishReason(w.DoneReason)
	}
	if calls := w.Message.ToolCalls; len(calls) > 0 {
		i := -1 // a call of another function is not the answer
		for j := range calls {
			if calls[j].Function.Name == schemaName(req) {
				i = j
				break
			}
		}
		if i >= 0 {
			out.Text = toolArguments(calls[i].Function.Arguments)
			if out.FinishReason == fixpoint.FinishStop {
				out.FinishReason = fixpoint.FinishTool
			}
		}
	}
	out.Usage, out.UsageAnomaly = w.usage()
	normalizeRefusal(out)
	return nil
}
