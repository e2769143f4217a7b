package jobstatus

import "testing"

func TestFinal(t *testing.T) {
	t.Parallel()
	for _, s := range All() {
		if got, want := s.Final(), s != Queued; got != want {
			t.Errorf("%s.Final() = %v, want %v", s, got, want)
		}
	}
	if Status("nope").Final() {
		t.Error("an unknown status is final")
	}
}
