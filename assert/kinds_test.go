package assert

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// outcomes builds the outcome counts of ok successes out of n requests,
// spread over connections of the given sizes (nil: no per-connection
// statistics); failures sit on the first connections.
func outcomes(ok, n int64, sizes ...int64) Counts {
	c := Counts{Buckets: []string{"success", "failure"}, N: []int64{ok, n - ok}}
	if sizes == nil {
		return c
	}
	conns := make([][]int64, len(sizes))
	fails := n - ok
	for j, m := range sizes {
		f := min(fails, m)
		fails -= f
		conns[j] = []int64{m - f, f}
	}
	return withUnits(c, conns)
}

func equalSizes(conns int, m int64) []int64 {
	s := make([]int64, conns)
	for j := range s {
		s[j] = m
	}
	return s
}

func TestSuccessRate(t *testing.T) {
	t.Parallel()
	// Closed forms for a clean run: the exact one-sided lower bound of
	// n of n at 1-α is α^{1/n}; it reaches 99% at n >= ln 0.05/ln 0.99 =
	// 298.07, so 299 requests; zero tolerance needs 1-α^{1/n} <= 5%,
	// n >= ln 0.05/ln 0.95 = 58.4, so 59.
	s := ShareSpec{Confidence: 0.95}
	cases := []struct {
		name     string
		r        Result
		want     Verdict
		required int64
		conns    int64
		reason   string
	}{
		{"clearly fine", SuccessRate(9990, outcomes(9990, 10000), 0.99, s), Pass, 0, 0, "at most"},
		{"clearly bad", SuccessRate(900, outcomes(900, 1000), 0.99, s), Fail, 0, 0, "above the 1% successRate atLeast 99% allows"},
		{"all ok, too few", SuccessRate(100, outcomes(100, 100), 0.99, s), Inconclusive, 299, 0, "about 299 requests"},
		{"all ok, enough", SuccessRate(299, outcomes(299, 299), 0.99, s), Pass, 0, 0, "299 requests"},
		{"floor 0", SuccessRate(0, outcomes(0, 10), 0, s), Pass, 0, 0, ""},
		{"nothing counted", SuccessRate(0, outcomes(0, 0), 0.99, s), Inconclusive, 299, 0, "no requests"},
		{"invalid", SuccessRate(11, outcomes(10, 10), 0.99, s), Inconclusive, 0, 0, "11 successes"},
		// Issue 9 defect 8: atLeast 100% is zero tolerance, so it can PASS.
		{"zero tolerance passes", SuccessRate(59, outcomes(59, 59), 1, s), Pass, 0, 0, "zero tolerance: none of 59 requests failed"},
		{"zero tolerance, too few", SuccessRate(58, outcomes(58, 58), 1, s), Inconclusive, 59, 0, "below 5% (statistics.margin)"},
		{"zero tolerance fails", SuccessRate(999, outcomes(999, 1000), 1, s), Fail, 0, 0, "zero tolerance: 1 of 1000 requests"},
		// Issue 9 defect 1 / issue 22: a perfect run of 4 keep-alive workers
		// × 250. Four connections cannot show that requests on one are
		// independent, so each is one draw, and the advice is connections
		// (defect 9), quoting real requests (defect 10), whatever the
		// declared balancing.
		{"defect 1, perfect, 4 connections per request", SuccessRate(1000, outcomes(1000, 1000, equalSizes(4, 250)...), 0.99, s),
			Inconclusive, 0, 299, "1000 requests on 4 connections, worth 4 independent draws: with fewer than 10 connections"},
		{"defect 1, perfect, per connection", SuccessRate(1000, outcomes(1000, 1000, equalSizes(4, 250)...), 0.99, ShareSpec{Sampling: perConn(4)}),
			Inconclusive, 0, 299, "1000 requests on 4 connections, worth 4 independent draws"},
		{"defect 1, one failure, per connection", SuccessRate(999, outcomes(999, 1000, equalSizes(4, 250)...), 0.99, ShareSpec{Sampling: perConn(4)}),
			Inconclusive, 0, 0, "worth 4 independent draws"},
		// Issue 22 item 2: 1500 of 1500 through a per-request round robin
		// over 112 keep-alive connections, whose routing shows no
		// clustering (design effect 1.02): PASS, whatever was declared.
		{"issue 22.2, per-request routing, declared connection", SuccessRate(1500, outcomes(1500, 1500, equalSizes(112, 13)[:100]...), 0.99,
			ShareSpec{Sampling: Sampling{Balancing: PerConnection, FixedConnections: 112, RoutingDesignEffect: 1.02}}),
			Pass, 0, 0, "design effect 1.02 estimated from the routing of the same requests"},
		// Without the routing the same run is worth its connections only.
		{"issue 22.2, no routing", SuccessRate(1300, outcomes(1300, 1300, equalSizes(100, 13)...), 0.99, ShareSpec{Sampling: Sampling{FixedConnections: 100}}),
			Inconclusive, 0, 299, "the routing of these requests was not attributed"},
		// A perfect open-loop run of 1000 requests on 10 connections
		// routed per request.
		{"defect 1, open loop on 10 connections", SuccessRate(1000, outcomes(1000, 1000, equalSizes(10, 100)...), 0.99, ShareSpec{Sampling: Sampling{Balancing: PerRequest, FixedConnections: 10, RoutingDesignEffect: 1.3}}),
			Pass, 0, 0, "1000 requests on 10 connections, worth 769 independent draws"},
		// CI's Flagger gate: a perfect run whose routing clustered (design
		// effect 2.52): the note quotes the routing's estimate, not the
		// outcomes' own (0: one bucket).
		{"routing clustered, note quotes it", SuccessRate(600, outcomes(600, 600, equalSizes(12, 50)...), 0.99, ShareSpec{Sampling: Sampling{Balancing: PerRequest, FixedConnections: 12, RoutingDesignEffect: 2.52}}),
			Inconclusive, 0, 16, "were routed to the same place more often than independent draws would (observed design effect 2.52 over 12 connections)"},
		// Defect 9: 55,000 requests on the same 5 connections settle nothing.
		{"defect 9, 55000 on 5 connections", SuccessRate(55000, outcomes(55000, 55000, equalSizes(5, 11000)...), 0.99, ShareSpec{Sampling: perConn(5)}),
			Inconclusive, 0, 299, "or keepAlive: false with about 299 requests"},
	}
	for _, c := range cases {
		if c.r.Verdict != c.want || c.r.RequiredN != c.required || (c.conns > 0 && c.r.RequiredConnections != c.conns) || !strings.Contains(c.r.Reason, c.reason) {
			t.Errorf("%s: %v required %d requests / %d connections (%s); want %v, %d requests / %d connections, mentioning %q",
				c.name, c.r.Verdict, c.r.RequiredN, c.r.RequiredConnections, c.r.Reason, c.want, c.required, c.conns, c.reason)
		}
		mustJSON(t, c.r)
	}
	r := SuccessRate(1000, outcomes(1000, 1000), 0.99, s)
	near(t, "clean lower bound", r.Interval.Lo, math.Pow(0.05, 1.0/1000), 1e-9)
	near(t, "observed", r.Observed, 1, 0)
}

// Issue 9 defect 1: adding a failure never raises the verdict, under
// either balancing: turning a success into a failure on the same
// connection, or appending a failed request to any connection, old or new.
func TestSuccessRateMonotone(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 3000 {
		conns := 1 + r.IntN(12)
		sizes := make([]int64, conns)
		var n int64
		for j := range sizes {
			sizes[j] = 1 + r.Int64N(200)
			n += sizes[j]
		}
		fails := r.Int64N(n/20 + 2)
		fails = min(fails, n)
		floor := []float64{0.9, 0.95, 0.99, 0.999, 1}[r.IntN(5)]
		s := ShareSpec{Confidence: []float64{0.9, 0.95, 0.99}[r.IntN(3)], Sampling: []Sampling{perRequest, perConn(int64(conns))}[r.IntN(2)]}
		before := SuccessRate(n-fails, outcomes(n-fails, n, sizes...), floor, s).Verdict
		if fails < n {
			swapped := SuccessRate(n-fails-1, outcomes(n-fails-1, n, sizes...), floor, s).Verdict
			if swapped < before {
				t.Fatalf("case %d: a success turned failure raised %v to %v (n=%d fails=%d sizes=%v floor=%g %+v)", i, before, swapped, n, fails, sizes, floor, s)
			}
		}
		grown := append([]int64(nil), sizes...)
		if j := r.IntN(conns + 1); j == conns {
			grown = append(grown, 1)
		} else {
			grown[j]++
		}
		// The failures sit on the first connections; move the new one
		// there too by rebuilding from the grown sizes.
		added := SuccessRate(n-fails, outcomes(n-fails, n+1, grown...), floor, s).Verdict
		if added < before {
			t.Fatalf("case %d: an added failure raised %v to %v (n=%d fails=%d sizes=%v→%v floor=%g %+v)", i, before, added, n, fails, sizes, grown, floor, s)
		}
	}
}

func TestOnlyNever(t *testing.T) {
	t.Parallel()
	s := ShareSpec{Confidence: 0.95}
	cases := []struct {
		name     string
		r        Result
		want     Verdict
		required int64
		reason   string
	}{
		{"only strict, none outside", Only(counts("c2", 600, "c3", 400), []string{"c2", "c3"}, 0, s), Pass, 0, "zero tolerance: none of 1000 requests went outside {c2, c3}"},
		{"only strict, one outside", Only(counts("c2", 600, "c3", 400, "c4", 1), []string{"c2", "c3"}, 0, s), Fail, 0, "c4=1"},
		// Issue 9 defect 8: one request is no evidence of zero tolerance.
		{"only strict, one request", Only(counts("c2", 1), []string{"c2"}, 0, s), Inconclusive, 59, "about 59 requests"},
		{"only margin, 1% outside", Only(counts("c2", 9900, "c4", 100), []string{"c2"}, 0.05, s), Pass, 0, "within the 5% only with margin 5% allows"},
		{"only margin, 10% outside", Only(counts("c2", 900, "c4", 100), []string{"c2"}, 0.05, s), Fail, 0, "above the 5% only with margin 5% allows"},
		{"only margin, too few", Only(counts("c2", 191, "c4", 9), []string{"c2"}, 0.05, s), Inconclusive, -1, "would settle"},
		{"only nothing counted", Only(Counts{}, []string{"c2"}, 0, s), Inconclusive, 59, "no requests"},
		{"never strict, none in", Never(counts("c2", 1000), []string{"c3"}, 0, s), Pass, 0, "below 0.299%"},
		{"never strict, some in", Never(counts("c2", 1000, "c3", 2), []string{"c3"}, 0, s), Fail, 0, "2 of 1002"},
		{"never strict, one request", Never(counts("c2", 1), []string{"v3"}, 0, s), Inconclusive, 59, "zero tolerance"},
		{"never margin", Never(counts("c2", 9900, "c3", 100), []string{"c3"}, 0.05, s), Pass, 0, ""},
		{"bad margin", Never(counts("c2", 1), []string{"c3"}, 1, s), Inconclusive, 0, "margin"},
		{"no buckets", Never(counts("c2", 1), nil, 0, s), Inconclusive, 0, "no buckets"},
	}
	for _, c := range cases {
		if c.r.Verdict != c.want || !strings.Contains(c.r.Reason, c.reason) || c.required >= 0 && c.r.RequiredN != c.required {
			t.Errorf("%s: %v required %d %q; want %v required %d mentioning %q", c.name, c.r.Verdict, c.r.RequiredN, c.r.Reason, c.want, c.required, c.reason)
		}
		if c.r.Verdict == Inconclusive && c.r.Interval != nil && c.r.RequiredN == 0 {
			t.Errorf("%s: INCONCLUSIVE without advice", c.name)
		}
		mustJSON(t, c.r)
	}

	// Rule of three (Hanley and Lippman-Hand 1983, JAMA 249:1743): with
	// nothing seen in n, the one-sided 95% upper bound is about 3/n; the
	// exact bound 1-0.05^{1/n} is 2.996/n to first order.
	r := Never(counts("c2", 1000), []string{"c3"}, 0, s)
	near(t, "rule of three", r.Interval.Hi, 3.0/1000, 0.01*3.0/1000)

	// Five sticky connections, one outside: per connection that is 5
	// draws, far from a PASS at 5%.
	c := stuck(counts("c2", 400, "c3", 400, "c4", 200), 200, 0, 0, 1, 1, 2)
	if v := Only(c, []string{"c2", "c3"}, 0.05, ShareSpec{Sampling: perConn(5)}).Verdict; v == Pass {
		t.Errorf("5 sticky connections, one outside: %v", v)
	}
}

func TestReached(t *testing.T) {
	t.Parallel()
	// Default minimum share 1/(2k); FAIL once 1-(α/k)^{1/n} < minShare:
	// k=2, α=.05: n > ln 0.025/ln 0.75 = 12.82, so 13; at 99%,
	// n > ln 0.005/ln 0.75 = 18.4, so 19.
	// Issue 9 defect 7: a 99/1 canary whose split says 1% goes unseen in
	// 100 requests 0.99^100 = 37% of the time; with minShare 1% FAIL waits
	// for n > ln 0.025/ln 0.99 = 367.0, so 368.
	s95, s99 := ShareSpec{Confidence: 0.95}, ShareSpec{Confidence: 0.99}
	canary := MinShare{Share: 0.01, From: "split 99/1"}
	cases := []struct {
		name     string
		r        Result
		want     Verdict
		required int64
		conns    int64
		reason   string
	}{
		{"all reached", Reached(counts("c2", 3, "c3", 1), []string{"c2", "c3"}, MinShare{}, s95), Pass, 0, 0, "c3=1"},
		{"missing, enough requests", Reached(counts("c2", 13), []string{"c2", "c3"}, MinShare{}, s95), Fail, 0, 0, "c3 got no request"},
		{"missing, too few", Reached(counts("c2", 12), []string{"c2", "c3"}, MinShare{}, s95), Inconclusive, 13, 0, "half an equal share"},
		{"confidence is used", Reached(counts("c2", 18), []string{"c2", "c3"}, MinShare{}, s99), Inconclusive, 19, 0, "99.5%"},
		{"confidence is used, enough", Reached(counts("c2", 19), []string{"c2", "c3"}, MinShare{}, s99), Fail, 0, 0, ""},
		{"nothing counted", Reached(Counts{}, []string{"c2", "c3"}, MinShare{}, s95), Inconclusive, 13, 0, "no requests"},
		{"unnamed traffic is not Reached's business", Reached(counts("c2", 5, "c9", 5), []string{"c2"}, MinShare{}, s95), Pass, 0, 0, ""},
		{"no buckets", Reached(counts("c2", 5), nil, MinShare{}, s95), Inconclusive, 0, 0, "no buckets"},
		{"defect 7 canary at 100", Reached(counts("c1", 100), []string{"c1", "c2"}, canary, s95), Inconclusive, 368, 0, "minimum share 1% (split 99/1)"},
		{"defect 7 canary at 368", Reached(counts("c1", 368), []string{"c1", "c2"}, canary, s95), Fail, 0, 0, "minimum share 1%"},
		// 5 sticky connections of 200, all on c2: 5 draws; 13 are needed,
		// and more requests on the same connections would not add any.
		{"sticky connections", Reached(stuck(counts("c2", 1000, "c3", 0), 200, 0, 0, 0, 0, 0), []string{"c2", "c3"}, MinShare{}, ShareSpec{Sampling: perConn(5)}),
			Inconclusive, 0, 13, "about 13 connections"},
	}
	for _, c := range cases {
		if c.r.Verdict != c.want || c.r.RequiredN != c.required || c.r.RequiredConnections != c.conns || !strings.Contains(c.r.Reason, c.reason) {
			t.Errorf("%s: %v required %d / %d connections %q; want %v required %d / %d mentioning %q",
				c.name, c.r.Verdict, c.r.RequiredN, c.r.RequiredConnections, c.r.Reason, c.want, c.required, c.conns, c.reason)
		}
		mustJSON(t, c.r)
	}
	// The canary's false FAIL, exactly: a correct 1% bucket is unseen in
	// n requests with probability 0.99^n, and reached may FAIL it only
	// when that is at most α/k.
	for n := 1; n <= 2000; n++ {
		if Reached(counts("c1", n), []string{"c1", "c2"}, canary, s95).Verdict == Fail && math.Pow(0.99, float64(n)) > 0.025 {
			t.Fatalf("n=%d: FAIL while a 1%% bucket goes unseen with probability %.4f", n, math.Pow(0.99, float64(n)))
		}
	}
}
