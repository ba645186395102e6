// Package gate lets a server wait for its handlers: once closed, no
// handler starts, and Close returns when the running ones have finished
// (their last log line written), so a log file is never closed under one.
package gate

import (
	"sync"
	"sync/atomic"
)

// Gate admits work until Close. The zero value is open.
type Gate struct {
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
	active  atomic.Int64 // WaitGroup has no counter to read
}

// Enter admits one piece of work unless Close began; call Leave when it ends.
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.wg.Add(1)
	g.active.Add(1)
	return true
}

// Leave ends work Enter admitted.
func (g *Gate) Leave() {
	g.active.Add(-1)
	g.wg.Done()
}

// Active is how much admitted work is running.
func (g *Gate) Active() int64 { return g.active.Load() }

// Close refuses new work and waits for the admitted work to end.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	g.wg.Wait()
}
