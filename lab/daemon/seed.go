package daemon

import (
	"fmt"
	"hash/fnv"
)

// entrySeed derives the seed of one entry pod's simulator from the lab's
// seed (lab/README.md, "Random routing"). The key names the pod by what
// is stable across labs brought up from the same topology — entry,
// cluster and the how-manieth pod of that entry this daemon started —
// not by its generated name, so `lab up --seed N` replays a lab's
// choices; distinct keys give unrelated sequences.
func entrySeed(labSeed uint64, entry, cluster string, instance int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", entry, cluster, instance)
	return splitmix64(labSeed ^ h.Sum64())
}

// splitmix64 is SplitMix64's finaliser: it spreads every input bit over
// the output, so seeds that differ in one bit are unrelated.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
