package llm

import (
	"encoding/json"
	"errors"
	"fmt"
)

// briefDecodeError shortens a JSON type error of a provider body: its text
// names the Go struct type, which for a nested field was 2 KB of type
// literal stored as the attempt's provider_error.
func briefDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s is a JSON %s, not the %s the API sends", te.Field, te.Value, te.Type.Kind())
	}
	return err
}
