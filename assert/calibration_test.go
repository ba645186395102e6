package assert

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Calibration of the split decision rule (docs/statistics.md §7): the
// probabilities of a false FAIL, a false PASS and a PASS at the planned n,
// by exact enumeration of every multinomial outcome for n <= 30 and by
// seeded simulation for large n. Every probability of an outcome is
// computed here by hand from log-factorials; the verdicts come from the
// rule Split really applies (BucketRule, checked against Split itself on
// random outcomes), so what is measured is the shipped decision.
//
// The full grid runs with
//
//	go test ./assert -run Calibration -args -calibrate
//
// (or MESH_VERIFY_CALIBRATE=1) and writes a Markdown table to
// -calibrate-out; without it a reduced grid runs, still able to fail.

var (
	calibrate    = flag.Bool("calibrate", false, "run the full calibration grid (slow) and write its table")
	calibrateOut = flag.String("calibrate-out", "calibration.md", "where -calibrate writes its Markdown table")
)

func fullCalibration() bool { return *calibrate || os.Getenv("MESH_VERIFY_CALIBRATE") == "1" }

// calSplit is one expected split of the grid.
type calSplit struct {
	name  string
	names []string
	p     []float64
}

func (s calSplit) expected() map[string]float64 {
	m := make(map[string]float64, len(s.names))
	for i, b := range s.names {
		m[b] = s.p[i]
	}
	return m
}

func equalSplit(k int) calSplit {
	s := calSplit{name: fmt.Sprintf("equal k=%d", k)}
	for i := range k {
		s.names = append(s.names, fmt.Sprintf("b%d", i+1))
		s.p = append(s.p, 1/float64(k))
	}
	return s
}

func unequalSplit(p ...float64) calSplit {
	s := calSplit{}
	var parts []string
	for i, v := range p {
		s.names = append(s.names, fmt.Sprintf("b%d", i+1))
		s.p = append(s.p, v)
		parts = append(parts, fmt.Sprintf("%g", 100*v))
	}
	s.name = strings.Join(parts, "/")
	return s
}

// calSplits are the grid's expected splits: equal and one unequal per k.
func calSplits() []calSplit {
	return []calSplit{
		equalSplit(2), unequalSplit(0.7, 0.3),
		equalSplit(3), unequalSplit(0.5, 0.3, 0.2),
		equalSplit(5), unequalSplit(0.4, 0.25, 0.15, 0.1, 0.1),
	}
}

var (
	calMargins     = []float64{0.02, 0.05, 0.10}
	calConfidences = []float64{0.90, 0.95, 0.99}
	calMethods     = []IntervalMethod{Wilson, ClopperPearson}
)

// truth is a true split the grid judges, and what a verdict on it means.
type truth struct {
	name string
	p    []float64
	// correct: within every bucket's band (FAIL is false); else outside
	// some band (PASS is false).
	correct bool
}

// shifted moves bucket i to p_i+d and scales the others so the shares
// still sum to 1; each other bucket then moves by at most |d|, so the
// others stay within their bands when |d| <= δ. ok is false when the
// shift leaves [0,1].
func shifted(p []float64, i int, d float64) ([]float64, bool) {
	q := make([]float64, len(p))
	qi := p[i] + d
	if qi < 0 || qi > 1 || p[i] == 1 {
		return nil, false
	}
	scale := (1 - qi) / (1 - p[i])
	for j := range p {
		q[j] = p[j] * scale
	}
	q[i] = qi
	return q, true
}

// calTruths are the truths for a split and margin: the expected split
// itself and every bucket on either edge of its band (the hardest correct
// splits), then every bucket just outside either edge (the easiest wrong
// ones to pass).
func calTruths(s calSplit, margin float64) []truth {
	ts := []truth{{name: "as expected", p: slices.Clone(s.p), correct: true}}
	const eps = 1e-6
	for _, side := range []float64{+1, -1} {
		for i := range s.p {
			if q, ok := shifted(s.p, i, side*margin); ok {
				ts = append(ts, truth{name: fmt.Sprintf("%s at %+g", s.names[i], side*margin), p: q, correct: true})
			}
			if q, ok := shifted(s.p, i, side*(margin+eps)); ok {
				ts = append(ts, truth{name: fmt.Sprintf("%s just beyond %+g", s.names[i], side*margin), p: q})
			}
		}
	}
	return ts
}

// calCell is one configuration of the decision rule.
type calCell struct {
	split      calSplit
	margin     float64
	confidence float64
	method     IntervalMethod
}

func (c calCell) spec() SplitSpec {
	return SplitSpec{Expected: c.split.expected(), Margin: c.margin, Confidence: c.confidence, Method: c.method}
}

func (c calCell) String() string {
	// The method as written in a scenario: its String is for reports.
	return fmt.Sprintf("%s ±%g%% conf %g %s", c.split.name, 100*c.margin, c.confidence, string(c.method))
}

// rules are the per-bucket rules of the cell, from the same spec Split
// gets.
func (c calCell) rules() []BucketRule {
	s := c.spec().withDefaults()
	return bucketRules(s, c.split.names)
}

// verdictTable caches each bucket's verdict by (n, x), from the rule.
type verdictTable struct {
	rules []BucketRule
	memo  []map[[2]int64]Verdict
}

func newVerdictTable(rules []BucketRule) *verdictTable {
	t := &verdictTable{rules: rules, memo: make([]map[[2]int64]Verdict, len(rules))}
	for i := range t.memo {
		t.memo[i] = map[[2]int64]Verdict{}
	}
	return t
}

func (t *verdictTable) bucket(i int, x, n int64) Verdict {
	key := [2]int64{n, x}
	v, ok := t.memo[i][key]
	if !ok {
		v = t.rules[i].Judge(float64(x), float64(n)).Verdict
		t.memo[i][key] = v
	}
	return v
}

// split composes the buckets' verdicts the way a split does: any FAIL
// fails, all PASS passes.
func (t *verdictTable) split(x []int64, n int64) Verdict {
	all := Pass
	for i := range x {
		switch t.bucket(i, x[i], n) {
		case Fail:
			return Fail
		case Inconclusive:
			all = Inconclusive
		}
	}
	return all
}

// logFactorials[n] = ln n!, by summing logs (not our code, not Lgamma).
func logFactorials(n int) []float64 {
	lf := make([]float64, n+1)
	for i := 1; i <= n; i++ {
		lf[i] = lf[i-1] + math.Log(float64(i))
	}
	return lf
}

// compositions calls f with every way to put n draws into k buckets.
func compositions(n int64, k int, f func([]int64)) {
	x := make([]int64, k)
	var rec func(i int, left int64)
	rec = func(i int, left int64) {
		if i == k-1 {
			x[i] = left
			f(x)
			return
		}
		for v := int64(0); v <= left; v++ {
			x[i] = v
			rec(i+1, left-v)
		}
	}
	rec(0, n)
}

// enumResult is the exact probability of each verdict under each truth.
type enumResult struct {
	cell   calCell
	n      int64
	truths []truth
	fail   []float64
	pass   []float64
}

// enumerate computes, for every cell sharing one split, the exact
// probabilities of FAIL and PASS at n under each truth:
// Σ over outcomes of n!/Π x_i! · Π p_i^{x_i}.
func enumerate(split calSplit, cells []calCell, tables []*verdictTable, truths [][]truth, n int64, lf []float64) []enumResult {
	out := make([]enumResult, len(cells))
	for c := range cells {
		out[c] = enumResult{cell: cells[c], n: n, truths: truths[c], fail: make([]float64, len(truths[c])), pass: make([]float64, len(truths[c]))}
	}
	k := len(split.p)
	compositions(n, k, func(x []int64) {
		logCoef := lf[n]
		for _, v := range x {
			logCoef -= lf[v]
		}
		for c, cell := range cells {
			_ = cell
			v := tables[c].split(x, n)
			if v == Inconclusive {
				continue
			}
			for t, tr := range truths[c] {
				pr := math.Exp(logCoef + logPowers(x, tr.p))
				if v == Fail {
					out[c].fail[t] += pr
				} else {
					out[c].pass[t] += pr
				}
			}
		}
	})
	return out
}

// logPowers is Σ_i x_i ln p_i, the log of an outcome's probability less
// its multinomial coefficient (-Inf when a bucket with p_i = 0 got some).
func logPowers(x []int64, p []float64) float64 {
	lp := 0.0
	for i, v := range x {
		if v == 0 {
			continue
		}
		if p[i] == 0 {
			return math.Inf(-1)
		}
		lp += float64(v) * math.Log(p[i])
	}
	return lp
}

// cellsOf lists the grid's cells for one split.
func cellsOf(s calSplit) []calCell {
	var cells []calCell
	for _, m := range calMargins {
		for _, conf := range calConfidences {
			for _, method := range calMethods {
				cells = append(cells, calCell{split: s, margin: m, confidence: conf, method: method})
			}
		}
	}
	return cells
}

// exactGrid enumerates every outcome of n = 1..top for the cells of one
// split and fails the test wherever a correct truth FAILs, or a truth
// outside a band PASSes, with probability above α. It returns how close a
// false FAIL came to α (α minus the closest) and where.
func exactGrid(t *testing.T, split calSplit, cells []calCell, top int64, lf []float64) (float64, string) {
	t.Helper()
	tables := make([]*verdictTable, len(cells))
	truths := make([][]truth, len(cells))
	for c, cell := range cells {
		tables[c] = newVerdictTable(cell.rules())
		truths[c] = calTruths(split, cell.margin)
	}
	closest, where := 1.0, ""
	for n := int64(1); n <= top; n++ {
		for _, r := range enumerate(split, cells, tables, truths, n, lf) {
			alpha := 1 - r.cell.confidence
			for i, tr := range r.truths {
				switch {
				case tr.correct && r.fail[i] > alpha+1e-12:
					t.Errorf("%s, truth %s, n=%d: false FAIL %.6f > α %g", r.cell, tr.name, n, r.fail[i], alpha)
				case !tr.correct && r.pass[i] > alpha+1e-12:
					t.Errorf("%s, truth %s, n=%d: false PASS %.6f > α %g", r.cell, tr.name, n, r.pass[i], alpha)
				}
				if tr.correct && alpha-r.fail[i] < closest {
					closest = alpha - r.fail[i]
					where = fmt.Sprintf("%s, truth %s, n=%d: false FAIL %.5f", r.cell, tr.name, n, r.fail[i])
				}
			}
		}
	}
	return closest, where
}

// TestCalibrationExact enumerates every outcome for n = 1..30 over the
// whole grid: a correct split (as expected, or any bucket on the edge of
// its band) must FAIL with probability at most α at every n, and a split
// just outside a band must PASS with probability at most α.
func TestCalibrationExact(t *testing.T) {
	t.Parallel()
	const maxN = 30
	lf := logFactorials(maxN)
	closest, where := 1.0, ""
	for _, split := range calSplits() {
		top := int64(maxN)
		if len(split.p) == 5 && !fullCalibration() {
			// Five buckets to n = 30 is 324,631 outcomes per truth and
			// cell: the calibrate mode's job; every run goes to n = 15.
			top = 15
		}
		if c, w := exactGrid(t, split, cellsOf(split), top, lf); c < closest {
			closest, where = c, w
		}
	}
	t.Logf("closest false FAIL to α: %s", where)
}

// TestCalibrationExactTwoBuckets goes beyond the grid for two buckets,
// where enumeration is cheap: shares from 50/50 to 99/1, every margin and
// confidence of the grid and 99.9%, to n = 400 in the calibrate mode (60,
// and fewer shares, in every run). Small shares near 0 are where a score
// interval's end would fall too far in.
func TestCalibrationExactTwoBuckets(t *testing.T) {
	t.Parallel()
	top, shares := int64(60), []float64{0.5, 0.8, 0.95, 0.99}
	if fullCalibration() {
		top, shares = 400, []float64{0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99}
	}
	lf := logFactorials(int(top))
	closest, where := 1.0, ""
	for _, p := range shares {
		split := unequalSplit(p, 1-p)
		var cells []calCell
		for _, m := range calMargins {
			for _, conf := range []float64{0.9, 0.95, 0.99, 0.999} {
				for _, method := range calMethods {
					cells = append(cells, calCell{split: split, margin: m, confidence: conf, method: method})
				}
			}
		}
		if c, w := exactGrid(t, split, cells, top, lf); c < closest {
			closest, where = c, w
		}
	}
	t.Logf("closest false FAIL to α: %s", where)
}

// The seeded simulation: large n, the planner's promise, and the sampling
// units of docs/statistics.md §3.

// sampler draws multinomial counts with gonum's binomial generator (a
// reference implementation, not ours): x_1 ~ Bin(n, p_1), then each next
// bucket from what is left, with its share of what is left.
type sampler struct{ src rand.Source }

func (s sampler) multinomial(n int64, p []float64) []int64 {
	x := make([]int64, len(p))
	left, rest := n, 1.0
	for i := range p {
		switch {
		case left == 0:
		case i == len(p)-1 || rest <= p[i]:
			x[i] = left
		default:
			q := math.Min(math.Max(p[i]/rest, 0), 1)
			x[i] = int64(distuv.Binomial{N: float64(left), P: q, Src: s.src}.Rand())
		}
		left -= x[i]
		rest -= p[i]
	}
	return x
}

// perRequestUnits spreads n requests over conns keep-alive connections of
// equal size (a closed loop) and routes every request on its own with the
// true shares: the counts and the per-connection sums a tally would hold.
func (s sampler) perRequestUnits(names []string, n int64, conns int, p []float64) Counts {
	c := Counts{Buckets: names, N: make([]int64, len(p))}
	u := &UnitStats{Units: int64(conns), SumXX: make([]float64, len(p)), SumXM: make([]float64, len(p))}
	for j := range conns {
		m := n / int64(conns)
		if int64(j) < n%int64(conns) {
			m++
		}
		x := s.multinomial(m, p)
		mf := float64(m)
		u.SumMM += mf * mf
		for i, v := range x {
			c.N[i] += v
			u.SumXX[i] += float64(v * v)
			u.SumXM[i] += float64(v) * mf
		}
	}
	c.Units = u
	return c
}

// stickyUnits is per-connection balancing: conns connections of m requests
// each, every connection entirely in the bucket the balancer picked for it.
func stickyUnits(names []string, perBucket []int64, m int64) Counts {
	c := Counts{Buckets: names, N: make([]int64, len(perBucket))}
	u := &UnitStats{SumXX: make([]float64, len(perBucket)), SumXM: make([]float64, len(perBucket))}
	mf := float64(m)
	for i, k := range perBucket {
		c.N[i] = k * m
		u.Units += k
		u.SumMM += float64(k) * mf * mf
		u.SumXX[i] += float64(k) * mf * mf
		u.SumXM[i] += float64(k) * mf * mf
	}
	c.Units = u
	return c
}

// simRow is one simulated cell.
type simRow struct {
	cell              calCell
	scheme            string
	n                 int64 // effective draws: requests, or connections
	planned           int64
	draws             int
	falseFail         float64 // worst over the correct truths
	falsePass         float64 // worst over the truths outside a band
	pass              float64 // P(PASS) with the truth as expected
	power             float64 // the planner's promise, checked at n = planned
	failTruth, pTruth string
}

// simCell simulates one cell at n effective draws under every truth of
// the simulation (as expected, b1 on its upper edge, b1 just beyond it,
// the last bucket just beyond its lower edge).
func simCell(t *testing.T, r sampler, cell calCell, table *verdictTable, n int64, draws int) simRow {
	row := simRow{cell: cell, n: n, draws: draws}
	for _, tr := range simTruths(cell) {
		var pass, fail int
		for range draws {
			switch table.split(r.multinomial(n, tr.p), n) {
			case Pass:
				pass++
			case Fail:
				fail++
			}
		}
		pp, pf := float64(pass)/float64(draws), float64(fail)/float64(draws)
		switch {
		case tr.name == "as expected":
			row.pass = pp
			if pf > row.falseFail {
				row.falseFail, row.failTruth = pf, tr.name
			}
		case tr.correct:
			if pf > row.falseFail {
				row.falseFail, row.failTruth = pf, tr.name
			}
		default:
			if pp > row.falsePass {
				row.falsePass, row.pTruth = pp, tr.name
			}
		}
	}
	return row
}

// checkRow holds a simulated row to its promises, with Monte Carlo error:
// false FAIL and false PASS at most α + 3 SE, PASS at the planned n at
// least the power - 3 SE.
func checkRow(t *testing.T, row simRow) {
	t.Helper()
	alpha := 1 - row.cell.confidence
	se := func(p float64) float64 { return 3 * math.Sqrt(p*(1-p)/float64(row.draws)) }
	if row.falseFail > alpha+se(alpha) {
		t.Errorf("%s, %s, n=%d: false FAIL %.4f > α %.2f (%s)", row.cell, row.scheme, row.n, row.falseFail, alpha, row.failTruth)
	}
	if row.falsePass > alpha+se(alpha) {
		t.Errorf("%s, %s, n=%d: false PASS %.4f > α %.2f (%s)", row.cell, row.scheme, row.n, row.falsePass, alpha, row.pTruth)
	}
	if row.power > 0 && row.pass < row.power-se(row.power) {
		t.Errorf("%s, %s, n=%d (planned): PASS %.4f < power %.2f", row.cell, row.scheme, row.n, row.pass, row.power)
	}
}

// verifyAgainstSplit is the proof that the tables are the rule Split
// applies: Split on the real counts, with the per-connection sums a tally
// would hold, must give the composed verdict.
func verifyAgainstSplit(t *testing.T, cell calCell, table *verdictTable, c Counts, sampling Sampling, n int64) {
	t.Helper()
	spec := cell.spec()
	spec.Sampling = sampling
	got := Split(c, spec).Verdict
	x := make([]int64, len(cell.split.names))
	d := drawsFor(c, sampling)
	for i, b := range cell.split.names {
		x[i] = int64(math.Round(d.scaled(c.Count(b))))
	}
	if want := table.split(x, n); got != want {
		t.Fatalf("%s: Split says %v on %v (%s), the per-bucket rule composed says %v", cell, got, c.N, sampling.balancing(), want)
	}
}

// simCells is the simulation grid: the full one, or a reduced one of
// representative cells for every run of the tests.
func simCells() []calCell {
	var cells []calCell
	for _, s := range calSplits() {
		cells = append(cells, cellsOf(s)...)
	}
	if fullCalibration() {
		return cells
	}
	keep := map[string]bool{
		"equal k=2 ±5% conf 0.95 wilson":              true,
		"70/30 ±10% conf 0.9 clopper-pearson":         true,
		"50/30/20 ±5% conf 0.99 wilson":               true,
		"equal k=3 ±10% conf 0.95 clopper-pearson":    true,
		"40/25/15/10/10 ±10% conf 0.95 wilson":        true,
		"equal k=5 ±10% conf 0.9 clopper-pearson":     true,
		"equal k=2 ±2% conf 0.99 wilson":              true,
		"40/25/15/10/10 ±5% conf 0.9 clopper-pearson": true,
	}
	var out []calCell
	for _, c := range cells {
		if keep[c.String()] {
			out = append(out, c)
		}
	}
	return out
}

// TestCalibrationSimulation simulates the grid at the planner's n, half
// and twice it, for independent requests; and per-connection balancing
// over 2, 5, 10 and 50 connections and over the planner's number of
// connections (each connection pinned to one bucket, equal connections:
// the verdict is the rule's at n = connections, which Split on the real
// per-connection sums confirms). Per-request balancing over keep-alive
// connections, where the verdict depends on the estimated design effect,
// is TestCalibrationDependence's.
func TestCalibrationSimulation(t *testing.T) {
	t.Parallel()
	draws, verify := 400, 20
	if fullCalibration() {
		draws, verify = 20000, 200
	}
	r := sampler{src: rand.NewPCG(20260101, 9)}
	var rows []simRow
	// The reduced grid picks cells by name: a name that no longer matches
	// (the method printed by its String) once left it empty.
	if n := len(simCells()); n < 8 {
		t.Fatalf("the simulation grid has %d cells, want at least the reduced grid's 8", n)
	}
	for ci, cell := range simCells() {
		table := newVerdictTable(cell.rules())
		spec := cell.spec()
		planned := RequiredDraws(spec)
		if planned == 0 {
			t.Fatalf("%s: no plan", cell)
		}
		power := spec.withDefaults().Power
		for _, n := range []int64{max(planned/2, 1), planned, 2 * planned} {
			row := simCell(t, r, cell, table, n, draws)
			row.scheme, row.planned = "independent requests", planned
			if n == planned {
				row.power = power
			}
			checkRow(t, row)
			rows = append(rows, row)
		}
		for _, conns := range []int{2, 5, 10, 50} {
			// Per-connection balancing over conns connections of 20
			// requests: conns draws, whatever the requests.
			sticky := Sampling{Balancing: PerConnection, FixedConnections: int64(conns)}
			for range verify {
				c := stickyUnits(cell.split.names, r.multinomial(int64(conns), cell.split.p), 20)
				verifyAgainstSplit(t, cell, table, c, sticky, int64(conns))
			}
			row := simCell(t, r, cell, table, int64(conns), draws)
			row.scheme, row.planned = fmt.Sprintf("per-connection balancing, %d connections", conns), planned
			if int64(conns) >= planned {
				row.power = power
			}
			checkRow(t, row)
			rows = append(rows, row)
			// Where the planner needs more connections than there are,
			// a perfect run must say so in connections, not requests.
			perfect := make([]int64, len(cell.split.p))
			for i, p := range cell.split.p {
				perfect[i] = int64(math.Round(p * float64(conns)))
			}
			if res := Split(stickyUnits(cell.split.names, perfect, 20), withSampling(spec, sticky)); planned > int64(conns) &&
				res.Verdict == Inconclusive && (res.RequiredN != 0 || res.RequiredConnections <= int64(conns)) {
				t.Errorf("%s, %d sticky connections: advice %d requests / %d connections, want connections beyond %d", cell, conns, res.RequiredN, res.RequiredConnections, conns)
			}
		}
		// Per-connection balancing over as many connections as planned.
		sticky := Sampling{Balancing: PerConnection, FixedConnections: planned}
		for range verify {
			c := stickyUnits(cell.split.names, r.multinomial(planned, cell.split.p), 20)
			verifyAgainstSplit(t, cell, table, c, sticky, planned)
		}
		row := simCell(t, r, cell, table, planned, draws)
		row.scheme, row.planned, row.power = "per-connection balancing, planned connections", planned, power
		checkRow(t, row)
		rows = append(rows, row)
		if fullCalibration() && ci%10 == 0 {
			t.Logf("%d of %d cells", ci+1, len(simCells()))
		}
	}
	if fullCalibration() {
		// The sections from the dependence section on are
		// TestCalibrationDependence's and TestCalibrationOneRequest211's,
		// which run first (their file sorts first): keep them.
		text := calibrationMarkdown(rows)
		if old, err := os.ReadFile(*calibrateOut); err == nil {
			if i := strings.Index(string(old), depBegin); i >= 0 {
				text += "\n" + string(old[i:])
			}
		}
		if err := os.WriteFile(*calibrateOut, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", *calibrateOut)
	}
}

func withSampling(s SplitSpec, sm Sampling) SplitSpec { s.Sampling = sm; return s }

// calibrationMarkdown summarises the rows per group (k, scheme) and lists
// every cell at the planner's n.
func calibrationMarkdown(rows []simRow) string {
	var b strings.Builder
	type group struct {
		ff, fp, minPass float64
		ffAt, fpAt      string
		minAt           string
		cells           int
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range rows {
		key := fmt.Sprintf("k=%d | %s", len(r.cell.split.p), r.scheme)
		g, ok := groups[key]
		if !ok {
			g = &group{minPass: 2}
			groups[key] = g
			order = append(order, key)
		}
		g.cells++
		alpha := 1 - r.cell.confidence
		if d := r.falseFail / alpha; d > g.ff {
			g.ff, g.ffAt = d, fmt.Sprintf("%.4f (%s, n=%d)", r.falseFail, r.cell, r.n)
		}
		if d := r.falsePass / alpha; d > g.fp {
			g.fp, g.fpAt = d, fmt.Sprintf("%.4f (%s, n=%d)", r.falsePass, r.cell, r.n)
		}
		if r.power > 0 && r.pass < g.minPass {
			g.minPass, g.minAt = r.pass, fmt.Sprintf("%.4f (%s, n=%d)", r.pass, r.cell, r.n)
		}
	}
	b.WriteString("# Calibration of the split rule\n\nWritten by `make calibrate-stats` (assert/calibration_test.go and, from the dependence section on, assert/calibration_dependence_test.go); the method is docs/statistics.md §7.\n\n")
	fmt.Fprintf(&b, "Seeded simulation, %d draws a cell (seed PCG 20260101/9).\n\n", rows[0].draws)
	b.WriteString("| k | sampling | rows (cells × n) | worst false FAIL / α | worst false PASS / α | lowest PASS at the planned n |\n|---|---|---|---|---|---|\n")
	for _, key := range order {
		g := groups[key]
		minAt := g.minAt
		if minAt == "" {
			minAt = "— (planned n beyond these connections)"
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f: %s | %.2f: %s | %s |\n", key, g.cells, g.ff, orDash(g.ffAt), g.fp, orDash(g.fpAt), minAt)
	}
	b.WriteString("\nEvery cell with independent requests at the planner's n:\n\n| cell | planned n | PASS | false FAIL | false PASS |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.scheme == "independent requests" && r.n == r.planned {
			fmt.Fprintf(&b, "| %s | %d | %.4f | %.4f | %.4f |\n", r.cell, r.planned, r.pass, r.falseFail, r.falsePass)
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
