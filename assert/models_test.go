package assert

import (
	"math"
	"strings"
	"testing"
)

func sharesNear(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: shares %v, want %v", what, got, want)
		return
	}
	for b, w := range want {
		if g, ok := got[b]; !ok || math.Abs(g-w) > 1e-12 {
			t.Errorf("%s: %s = %v, want %v (all: %v)", what, b, g, w, got)
		}
	}
}

func TestModelsErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"negative weight", second(WeightsModel(map[string]float64{"c2": -1, "c3": 1})), "weights: bucket c2 has negative weight -1"},
		{"zero weights", second(WeightsModel(map[string]float64{"c2": 0})), "weights: all weights are zero"},
		{"NaN weight", second(WeightsModel(map[string]float64{"c2": math.NaN()})), "weights: bucket c2 has weight NaN"},
		{"no weights", second(WeightsModel(nil)), "weights: no buckets"},
		{"equal dup", second(EqualModel([]string{"a", "a"})), "equal: bucket a named twice"},
		{"equal none", second(EqualModel(nil)), "equal: no buckets"},
		{"no ready pods", second(EqualPerPodModel(map[string]int{"c1": 0})), "equal per pod: no ready pods in c1"},
		{"negative pods", second(EqualPerPodModel(map[string]int{"c1": -2})), "equal per pod: cluster c1 has -2 ready pods"},
		{"negative cost", second(LinkCostInverseModel(map[string]float64{"c1": -1}, nil)), "link cost inverse: cluster c1 has cost -1"},
		{"no eligible", second(LinkCostInverseModel(map[string]float64{"c1": 1}, map[string]int{"c1": 0})), "no cluster with a link cost has ready pods"},
		{"no connections", second(LinkCostBalancedModel(map[string]float64{"c1": 0}, nil, 0)), "link cost balanced: 0 concurrent connections"},
		{"mirror", second(MirrorModel(120)), "mirror: 120%"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, c.err, c.want)
		}
	}
}

func second(_ Shares, err error) error { return err }

func TestModels(t *testing.T) {
	t.Parallel()
	s, _ := WeightsModel(map[string]float64{"c2": 1, "c3": 3, "c4": 0})
	sharesNear(t, "weights", s.Shares, map[string]float64{"c2": 0.25, "c3": 0.75, "c4": 0})
	s, _ = EqualModel([]string{"a", "b", "c"})
	sharesNear(t, "equal", s.Shares, map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3})
	s, _ = EqualPerPodModel(map[string]int{"c1": 2, "c2": 3, "c3": 0})
	sharesNear(t, "per pod", s.Shares, map[string]float64{"c1": 0.4, "c2": 0.6, "c3": 0})
	sharesNear(t, "per pod pods", s.PodShares, map[string]float64{"c1/0": 0.2, "c1/1": 0.2, "c2/0": 0.2, "c2/1": 0.2, "c2/2": 0.2})
	s, _ = MirrorModel(10)
	sharesNear(t, "mirror", s.Shares, map[string]float64{BucketMirrored: 0.1, BucketNotMirrored: 0.9})

	// Inverse: 1/1 : 1/2 -> 2/3, 1/3; c3 has no ready pods, c9 no link.
	s, _ = LinkCostInverseModel(map[string]float64{"c1": 1, "c2": 2, "c3": 1}, map[string]int{"c1": 1, "c2": 2, "c3": 0, "c9": 1})
	sharesNear(t, "inverse", s.Shares, map[string]float64{"c1": 2.0 / 3, "c2": 1.0 / 3, "c3": 0, "c9": 0})
	sharesNear(t, "inverse pods", s.PodShares, map[string]float64{"c1/0": 2.0 / 3, "c2/0": 1.0 / 6, "c2/1": 1.0 / 6, "c9/0": 0})
	// A local site (cost 0) with ready pods takes everything.
	s, _ = LinkCostInverseModel(map[string]float64{"local": 0, "r": 1}, nil)
	sharesNear(t, "inverse local", s.Shares, map[string]float64{"local": 1, "r": 0})
	// ...until it has no ready pods.
	s, _ = LinkCostInverseModel(map[string]float64{"local": 0, "r": 1, "q": 3}, map[string]int{"local": 0, "r": 1, "q": 1})
	sharesNear(t, "inverse local down", s.Shares, map[string]float64{"local": 0, "r": 0.75, "q": 0.25})
}

// The Skupper router's balanced distribution, worked by hand with its rule
// (skupper-router qdr_forward_balanced_CT): each new connection goes to the
// least open+cost; the local site wins ties (scanned first, replaced only
// on a strictly lower value).
func TestLinkCostBalancedSkupper(t *testing.T) {
	t.Parallel()
	// Local (cost 0) + one remote at cost 1, 10 concurrent connections,
	// values as (local open+0, remote open+1):
	//   1: (0,1) L   2: (1,1) tie->L   3: (2,1) R   4: (2,2) L   5: (3,2) R
	//   6: (3,3) L   7: (4,3) R        8: (4,4) L  9: (5,4) R  10: (5,5) L
	// local 6, remote 4.
	s, err := LinkCostBalancedModel(map[string]float64{"east": 0, "west": 1}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	sharesNear(t, "local+remote", s.Shares, map[string]float64{"east": 0.6, "west": 0.4})
	if len(s.Explanation) < 3 || !strings.Contains(strings.Join(s.Explanation, " "), "east 6, west 4") {
		t.Errorf("explanation %q", s.Explanation)
	}

	// Two remotes at costs 2 (a) and 4 (b), 5 connections, values (a, b):
	//   1: (2,4) a   2: (3,4) a   3: (4,4) tie->a (lower cost)   4: (5,4) b
	//   5: (5,5) tie->a
	// a 4, b 1. Breaking the remote ties the other way: 3 b, 4: (4,5) a,
	// 5: (5,5) b -> a 3, b 2, which the explanation must mention.
	// Pods a:1, b:2 -> a/0 0.8, b/0 0.1, b/1 0.1.
	s, err = LinkCostBalancedModel(map[string]float64{"a": 2, "b": 4}, map[string]int{"a": 1, "b": 2}, 5)
	if err != nil {
		t.Fatal(err)
	}
	sharesNear(t, "two remotes", s.Shares, map[string]float64{"a": 0.8, "b": 0.2})
	sharesNear(t, "two remotes pods", s.PodShares, map[string]float64{"a/0": 0.8, "b/0": 0.1, "b/1": 0.1})
	if !strings.Contains(strings.Join(s.Explanation, " "), "other order would give a 60%, b 40%") {
		t.Errorf("explanation does not give the other tie order: %q", s.Explanation)
	}

	// One connection and a local site: the local site gets it all. A site
	// without ready pods is left out, even if it is the cheapest.
	s, _ = LinkCostBalancedModel(map[string]float64{"l": 0, "r": 1}, nil, 1)
	sharesNear(t, "one connection", s.Shares, map[string]float64{"l": 1, "r": 0})
	s, _ = LinkCostBalancedModel(map[string]float64{"l": 0, "r": 1, "q": 2}, map[string]int{"l": 0, "r": 1, "q": 1}, 3)
	// r: 1, q: 2 -> r; (2,2) tie->r (lower cost); (3,2) q: r 2, q 1.
	sharesNear(t, "local down", s.Shares, map[string]float64{"l": 0, "r": 2.0 / 3, "q": 1.0 / 3})
}
