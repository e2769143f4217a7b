package wave_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// The defaults are a working configuration, and each setting that cannot
// work is reported by its name, so a command can name its flag.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (wave.Config{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("the defaults: %v, want valid", err)
	}
	for setting, c := range map[string]wave.Config{
		"MaxRequests":    {MaxRequests: -1},
		"Collect":        {Collect: -time.Second},
		"PollMin":        {PollMin: -time.Second},
		"Lease":          {Lease: 500 * time.Millisecond},
		"Idle":           {Idle: -time.Second},
		"DeadlineMargin": {DeadlineMargin: -time.Hour},
	} {
		var se *fixpoint.SettingError
		if err := c.WithDefaults().Validate(); !errors.As(err, &se) || se.Setting != setting {
			t.Errorf("%+v: %v, want a setting error naming %s", c, err, setting)
		}
	}
}
