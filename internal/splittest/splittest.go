// Package splittest draws an exact split for tests' HTTP servers: of
// every block of requests, a fixed number go to the first backend, at
// places in the block drawn by a seeded shuffle. The totals are exact at
// every block's end whatever the connections, and which connection lands
// where is as random as on a real mesh: a fixed cycle (the first ofC1
// places of every block) made a connection sticky whenever a busy
// machine let the workers run in step with it, and a coin's share drifts
// off its weight early in a run (both seen in CI).
package splittest

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Blocks is the sequence: Next is safe for concurrent use.
type Blocks struct {
	mu        sync.Mutex
	rng       *rand.Rand
	ofC1, of  int
	remaining []bool
}

// NewBlocks draws, of every `of` calls of Next in order, exactly ofC1
// trues. The shuffle is seeded by ofC1 and of: the same split draws the
// same sequence in every run.
func NewBlocks(ofC1, of int) *Blocks {
	if of <= 0 || ofC1 < 0 || ofC1 > of {
		panic(fmt.Sprintf("splittest.NewBlocks(%d, %d): want 0 <= ofC1 <= of, of > 0", ofC1, of))
	}
	return &Blocks{rng: rand.New(rand.NewPCG(uint64(ofC1), uint64(of))), ofC1: ofC1, of: of}
}

// Next reports whether this call's request goes to the first backend.
func (b *Blocks) Next() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.remaining) == 0 {
		b.remaining = make([]bool, b.of)
		for i := range b.ofC1 {
			b.remaining[i] = true
		}
		b.rng.Shuffle(b.of, func(i, j int) { b.remaining[i], b.remaining[j] = b.remaining[j], b.remaining[i] })
	}
	first := b.remaining[0]
	b.remaining = b.remaining[1:]
	return first
}
