package assert

import (
	"strings"
	"testing"
)

func TestReached(t *testing.T) {
	// k=2: FAIL needs (1-1/4)^n <= 0.025, n >= ln(0.025)/ln(0.75) = 12.8 -> 13.
	cases := []struct {
		name     string
		c        Counts
		buckets  []string
		want     Verdict
		required int64
		reason   string
	}{
		{"all reached", counts("c2", 3, "c3", 1), []string{"c2", "c3"}, Pass, 0, "c3=1"},
		{"missing, enough requests", counts("c2", 13), []string{"c2", "c3"}, Fail, 0, "c3 got no request"},
		{"missing, too few", counts("c2", 12), []string{"c2", "c3"}, Inconclusive, 13, "too few"},
		{"nothing counted", Counts{}, []string{"c2", "c3"}, Inconclusive, 13, "no requests"},
		{"unnamed traffic is not Reached's business", counts("c2", 5, "c9", 5), []string{"c2"}, Pass, 0, ""},
		{"no buckets", counts("c2", 5), nil, Inconclusive, 0, "no buckets"},
		// 5 connections of 200 requests, all on c2: worth 1000²/200000 = 5
		// draws, so 13 draws need 13·200 = 2600 requests.
		{"sticky connections", stuck(counts("c2", 1000, "c3", 0), 200, 0, 0, 0, 0, 0), []string{"c2", "c3"}, Inconclusive, 2600, "too few"},
	}
	for _, c := range cases {
		r := Reached(c.c, c.buckets)
		if r.Verdict != c.want || r.RequiredN != c.required || !strings.Contains(r.Reason, c.reason) {
			t.Errorf("%s: %v required %d %q; want %v required %d mentioning %q", c.name, r.Verdict, r.RequiredN, r.Reason, c.want, c.required, c.reason)
		}
		mustJSON(t, r)
	}
}

func TestOnlyNever(t *testing.T) {
	cases := []struct {
		name   string
		r      Result
		want   Verdict
		reason string
	}{
		{"only strict, none outside", Only(counts("c2", 600, "c3", 400), []string{"c2", "c3"}, 0, 0.95, Wilson), Pass, "at most"},
		{"only strict, one outside", Only(counts("c2", 600, "c3", 400, "c4", 1), []string{"c2", "c3"}, 0, 0.95, Wilson), Fail, "c4=1"},
		{"only margin, 1% outside", Only(counts("c2", 9900, "c4", 100), []string{"c2"}, 0.05, 0.95, Wilson), Pass, "within the allowed 5%"},
		{"only margin, 10% outside", Only(counts("c2", 900, "c4", 100), []string{"c2"}, 0.05, 0.95, Wilson), Fail, "above the allowed 5%"},
		{"only margin, too few", Only(counts("c2", 191, "c4", 9), []string{"c2"}, 0.05, 0.95, Wilson), Inconclusive, "would settle"},
		{"only nothing counted", Only(Counts{}, []string{"c2"}, 0, 0.95, Wilson), Inconclusive, "no requests"},
		{"never strict, none in", Never(counts("c2", 1000), []string{"c3"}, 0, 0.95, ClopperPearson), Pass, "at most 0.299%"},
		{"never strict, some in", Never(counts("c2", 1000, "c3", 2), []string{"c3"}, 0, 0.95, Wilson), Fail, "2 of 1002"},
		{"never margin", Never(counts("c2", 9900, "c3", 100), []string{"c3"}, 0.05, 0.95, Wilson), Pass, ""},
		{"bad margin", Never(counts("c2", 1), []string{"c3"}, 1, 0.95, Wilson), Inconclusive, "margin"},
		{"no buckets", Never(counts("c2", 1), nil, 0, 0.95, Wilson), Inconclusive, "no buckets"},
	}
	for _, c := range cases {
		if c.r.Verdict != c.want || !strings.Contains(c.r.Reason, c.reason) {
			t.Errorf("%s: %v %q; want %v mentioning %q", c.name, c.r.Verdict, c.r.Reason, c.want, c.reason)
		}
		if c.r.Verdict == Inconclusive && c.r.Interval != nil && c.r.RequiredN == 0 {
			t.Errorf("%s: INCONCLUSIVE without RequiredN", c.name)
		}
		mustJSON(t, c.r)
	}

	// Rule of three (Hanley and Lippman-Hand 1983, JAMA 249:1743): with
	// nothing seen in n, the one-sided 95% upper bound is about 3/n; the
	// exact bound is -ln(0.05)/n = 2.996/n to first order.
	r := Never(counts("c2", 1000), []string{"c3"}, 0, 0.95, ClopperPearson)
	near(t, "rule of three", r.Interval.Hi, 3.0/1000, 0.01*3.0/1000)

	// Several buckets merged with sticky connections: the bound on the
	// merged variance must still stop a confident PASS from 5 connections.
	c := stuck(counts("c2", 400, "c3", 400, "c4", 200), 200, 0, 0, 1, 1, 2)
	if v := Only(c, []string{"c2", "c3"}, 0.05, 0.95, Wilson).Verdict; v == Pass {
		t.Errorf("5 sticky connections, one outside: %v", v)
	}
}

func TestSuccessRate(t *testing.T) {
	cases := []struct {
		name     string
		r        Result
		want     Verdict
		required int64
	}{
		{"clearly fine", SuccessRate(9990, 10000, 0.99, 0.95, Wilson, nil), Pass, 0},
		{"clearly bad", SuccessRate(900, 1000, 0.99, 0.95, Wilson, nil), Fail, 0},
		{"on the floor", SuccessRate(99, 100, 0.99, 0.95, Wilson, nil), Inconclusive, 0},
		// All 100 succeed: the one-sided Wilson bound n/(n+z²), z = z_{0.95},
		// reaches 0.99 at n >= 99·z² = 267.85 -> 268 (A&S z_{0.95} = 1.644854).
		{"all ok, too few", SuccessRate(100, 100, 0.99, 0.95, Wilson, nil), Inconclusive, 268},
		{"floor 0", SuccessRate(0, 10, 0, 0.95, Wilson, nil), Pass, 0},
		{"nothing counted", SuccessRate(0, 0, 0.99, 0.95, Wilson, nil), Inconclusive, 0},
		{"invalid", SuccessRate(11, 10, 0.99, 0.95, Wilson, nil), Inconclusive, 0},
	}
	for _, c := range cases {
		if c.r.Verdict != c.want || c.r.RequiredN != c.required {
			t.Errorf("%s: %v required %d (%s); want %v required %d", c.name, c.r.Verdict, c.r.RequiredN, c.r.Reason, c.want, c.required)
		}
		mustJSON(t, c.r)
	}
	// 10000 successes on 10 connections: failures come per connection, so
	// this is worth 10 draws, not 10000.
	c := stuck(counts("ok", 10000, "err", 0), 1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	r := SuccessRate(10000, 10000, 0.99, 0.95, Wilson, c.Units)
	if r.Verdict != Inconclusive || !strings.Contains(r.Reason, "10 connections") {
		t.Errorf("sticky: %v %q", r.Verdict, r.Reason)
	}
}
