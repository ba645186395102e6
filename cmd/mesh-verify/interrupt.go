package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// interrupts turns Ctrl-C (and SIGTERM) into the two stops of a run: the
// first ends ctx, so no new request is sent and those in flight finish
// (up to drain, the request timeout) and are counted; the second ends
// abort, which cuts them short, so the run writes what it has and exits
// 130 at once. Each is announced on w. After the second the signals are
// released, so a third kills the process as Ctrl-C does any program (a
// report writer stuck on a full disk cannot hold it). stop releases them
// too.
func interrupts(parent context.Context, w io.Writer, drain time.Duration) (ctx, abort context.Context, stop func()) {
	ctx, interrupt := context.WithCancel(parent)
	abort, cutShort := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 0; n < 2; n++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			if n == 0 {
				fmt.Fprintf(w, "\ninterrupted: no new requests; waiting up to %s for those in flight, then writing the reports (Ctrl-C again to stop now)\n", drain)
				interrupt()
				continue
			}
			fmt.Fprintln(w, "\nstopping now: the requests in flight are abandoned; writing what was measured (Ctrl-C again kills mesh-verify without writing)")
			signal.Stop(sigs)
			cutShort()
		}
	}()
	return ctx, abort, func() {
		signal.Stop(sigs)
		close(done)
		interrupt()
		cutShort()
	}
}
