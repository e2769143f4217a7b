package queue

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MaxDeliveries is the part of the server's MAX_DELIVERIES advisory (kept
// in DeadStream) that names the job the server gave up on.
type MaxDeliveries struct {
	// StreamSeq is the job message's sequence in the job stream.
	StreamSeq uint64 `json:"stream_seq"`
	// Deliveries is how often it was delivered.
	Deliveries uint64 `json:"deliveries"`
}

// DecodeMaxDeliveries parses a MAX_DELIVERIES advisory; one that names no
// message is an error.
func DecodeMaxDeliveries(data []byte) (MaxDeliveries, error) {
	var a MaxDeliveries
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("MAX_DELIVERIES advisory is not valid JSON: %w", err)
	}
	if a.StreamSeq == 0 {
		return a, errors.New("MAX_DELIVERIES advisory names no stream sequence")
	}
	return a, nil
}
