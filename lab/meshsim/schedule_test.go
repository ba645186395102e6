package meshsim

import (
	"strings"
	"testing"
	"time"
)

// WeightsAfter moves a weighted route from 100/0 to 50/50 the given time
// after the first request, on the simulator's own clock (a fake one here,
// so the test does not sleep); the draws stay the seeded random ones.
func TestWeightsAfterSwitchesOnTheClock(t *testing.T) {
	bs := []Backend{
		{Cluster: "c1", Pod: "a", Version: "v1", Addr: "127.0.0.1:1", Ready: true},
		{Cluster: "c2", Pod: "b", Version: "v2", Addr: "127.0.0.1:2", Ready: true},
	}
	sim, err := New(Policy{Mode: ModeWeighted, WeightBy: ByCluster, Weights: map[string]float64{"c1": 100, "c2": 0},
		WeightsAfter: &WeightsAfter{After: 8 * time.Second, Weights: map[string]float64{"c1": 50, "c2": 50}}, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	sim.SetBackends(bs)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sim.now = func() time.Time { return now }
	count := func(n int) map[string]int {
		out := map[string]int{}
		for range n {
			b, _, ok := sim.route(nil)
			if !ok {
				t.Fatal("no upstream")
			}
			out[b.Cluster]++
		}
		return out
	}
	// The clock starts at the first request, not at New.
	now = now.Add(time.Hour)
	if got := count(1000); got["c2"] != 0 {
		t.Fatalf("before the switch: %v, want every request in c1", got)
	}
	now = now.Add(7999 * time.Millisecond)
	if got := count(1000); got["c2"] != 0 || sim.Stats().WeightsSwitched {
		t.Fatalf("1 ms before the switch: %v (switched %v), want every request in c1", got, sim.Stats().WeightsSwitched)
	}
	now = now.Add(time.Millisecond)
	got := count(4000)
	// 50/50 over 4000 draws: c2 within ±5 standard deviations (±158).
	if got["c2"] < 2000-158 || got["c2"] > 2000+158 {
		t.Fatalf("after the switch: %v, want about 2000 each", got)
	}
	if !sim.Stats().WeightsSwitched {
		t.Error("Stats.WeightsSwitched is false after the switch")
	}
}

func TestWeightsAfterValidation(t *testing.T) {
	w := map[string]float64{"c1": 1}
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"wrong mode", Policy{Mode: ModePerPod, WeightsAfter: &WeightsAfter{After: time.Second, Weights: w}}, "only applies to mode"},
		{"no delay", Policy{Mode: ModeWeighted, WeightBy: ByCluster, Weights: w, WeightsAfter: &WeightsAfter{Weights: w}}, "want a duration > 0"},
		{"zero sum", Policy{Mode: ModeWeighted, WeightBy: ByCluster, Weights: w,
			WeightsAfter: &WeightsAfter{After: time.Second, Weights: map[string]float64{"c1": 0}}}, "positive sum"},
		{"fraction", Policy{Mode: ModeWeighted, WeightBy: ByCluster, Weights: w,
			WeightsAfter: &WeightsAfter{After: time.Second, Weights: map[string]float64{"c1": 0.5}}}, "whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
