package gate

import (
	"testing"
	"time"
)

func TestCloseWaitsForAdmittedWorkAndRefusesNew(t *testing.T) {
	var g Gate
	if !g.Enter() || g.Active() != 1 {
		t.Fatal("an open gate refused work")
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	// Close must not return while the work runs; wait until it refuses.
	for g.Enter() {
		g.Leave()
		time.Sleep(time.Millisecond)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while work was running")
	default:
	}
	g.Leave()
	<-closed
	if g.Enter() || g.Active() != 0 {
		t.Fatal("a closed gate admitted work")
	}
}
