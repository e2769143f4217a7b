package fixpoint

import "fmt"

// SettingError names a setting of a configuration that cannot work, by its
// field path in that configuration ("Stream", "Lease", "Queue.AckWait"), so
// that a command can name its own flag for it. Scope is whose
// configuration it is: "queue" (queue.Config), "wave" (wave.Config) or
// "worker" (pipeline.WorkerConfig, whose Queue and Wave settings are named
// with their prefix). The queue, the wave driver and the worker return this
// one type, so a caller matches any of them with one errors.As.
type SettingError struct {
	Scope   string
	Setting string
	Value   any
	Problem string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("%s setting %s = %v %s", e.Scope, e.Setting, e.Value, e.Problem)
}
