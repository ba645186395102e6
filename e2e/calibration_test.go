package e2e

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
)

// The lab calibration (make calibrate, docs/calibration-lab.md): every
// catalog scenario whose lab routes at random is run on many labs, each
// brought up with a different seed, and its verdicts are counted. On the
// correct mesh each expectation must PASS as often as the power its
// scenario was planned for (statistics.power) and FAIL no more often than
// α; on a broken variant of the topology (a wrong weight, the mirror off
// or at 20%, a wrong link cost, traffic kept in one cluster) the scenario
// must FAIL. Too slow for make test: it runs only with -calibrate-lab.
var (
	calibrateLab       = flag.Bool("calibrate-lab", false, "run the lab calibration (slow) and write its table")
	calibrateLabOut    = flag.String("calibrate-lab-out", "calibration-lab.md", "where -calibrate-lab writes its Markdown table")
	calibrateLabSeeds  = flag.Int("calibrate-lab-seeds", 20, "labs (seeds) per correct scenario")
	calibrateLabBroken = flag.Int("calibrate-lab-broken", 5, "labs (seeds) per broken variant")
)

// labCase is one scenario on one topology, correct or broken.
type labCase struct {
	name      string   // row name
	topology  string   // built-in topology
	edit      []string // old, new pairs applied to the topology's files (editedTopology); none for the correct mesh
	scenarios []string // catalog scenarios run on each lab
	broken    bool     // the scenarios must FAIL
}

var labCases = []labCase{
	{name: "istio-mirror", topology: "istio-mirror", scenarios: []string{"istio-mirror", "istio-mirror-sidecar"}},
	{name: "kuma-canary", topology: "kuma-canary", scenarios: []string{"kuma-canary"}},
	{name: "istio-helloworld", topology: "istio-helloworld", scenarios: []string{"istio-helloworld"}},
	{name: "cilium-rebel-base", topology: "cilium-rebel-base", scenarios: []string{"cilium-rebel-base"}},
	{name: "mirror at 20%", topology: "istio-mirror", broken: true, scenarios: []string{"istio-mirror", "istio-mirror-sidecar"},
		edit: []string{"value: 50.", "value: 20"}},
	{name: "mirror off", topology: "istio-mirror", broken: true, scenarios: []string{"istio-mirror", "istio-mirror-sidecar"},
		edit: []string{"      mirror:\n        host: callme-service\n        subset: v2\n      mirrorPercentage:\n        value: 50.\n", ""}},
	{name: "kuma weights 80/20", topology: "kuma-canary", broken: true, scenarios: []string{"kuma-canary"},
		edit: []string{"weight: 90", "weight: 80", "weight: 10", "weight: 20"}},
	{name: "skupper-4 link costs ignored", topology: "skupper-4", broken: true, scenarios: []string{"skupper-4"},
		edit: []string{"skupper.io/cost: \"4\"", "skupper.io/cost: \"1\"", "skupper.io/cost: \"2\"", "skupper.io/cost: \"1\""}},
	// Istio's own objects route every request to v1, which runs in c1.
	{name: "helloworld kept in c1", topology: "istio-helloworld", broken: true, scenarios: []string{"istio-helloworld"},
		edit: []string{"    istio-injection: enabled\n", "    istio-injection: enabled\n---\n" + allToV1}},
	{name: "rebel-base kept in c1", topology: "cilium-rebel-base", broken: true, scenarios: []string{"cilium-rebel-base"},
		// Neither cluster's Service global: c1's and c2's files.
		edit: []string{"  annotations:\n    service.cilium.io/global: \"true\"\n", "", "  annotations:\n    service.cilium.io/global: \"true\"\n", ""}},
}

// verdictCount counts one row's verdicts: the scenario's and each expectation's.
type verdictCount struct {
	broken   bool // the row's topology is a broken variant: every run must FAIL
	runs     int
	scenario map[assert.Verdict]int
	expect   map[string]map[assert.Verdict]int
	order    []string
	power    float64
	alpha    float64
	failures []string // runs that did not give the verdict the row wants, with their seed
}

func TestLabCalibration(t *testing.T) {
	if !*calibrateLab {
		t.Skip("the lab calibration runs with -calibrate-lab (make calibrate)")
	}
	var mu sync.Mutex
	rows := map[string]*verdictCount{}
	start := time.Now()
	t.Run("cases", func(t *testing.T) {
		for _, c := range labCases {
			for _, sc := range c.scenarios {
				key := c.name + " / " + sc
				rows[key] = &verdictCount{broken: c.broken, scenario: map[assert.Verdict]int{}, expect: map[string]map[assert.Verdict]int{}}
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				topo := c.topology
				if len(c.edit) > 0 {
					topo = editedTopology(t, c.topology, c.edit)
				}
				n := *calibrateLabSeeds
				if c.broken {
					n = *calibrateLabBroken
				}
				for i := range n {
					// Seeds apart from the e2e's (1) and the demo's (1).
					seed := uint64(1000 + i)
					t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
						l := mv.Lab(t, e2etest.LabSpec{Topology: topo, Seed: seed})
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
						defer cancel()
						for _, sc := range c.scenarios {
							if from := catalogWorkersFrom[sc]; from != "" {
								applyRBAC(t, l, filepath.Join("..", "scenarios", "catalog", sc+".yaml"), []string{from})
							}
							r := runBinary(t, ctx, "run", filepath.Join("..", "scenarios", "catalog", sc+".yaml"), "--kubeconfig", l.Kubeconfig)
							if r.Report() == nil {
								t.Fatalf("%s seed %d: no report (exit %d)\n%s\n%s", sc, seed, r.Code, r.Stdout, r.Stderr)
							}
							mu.Lock()
							row := rows[c.name+" / "+sc]
							row.runs++
							row.scenario[r.Report().Verdict]++
							row.power, row.alpha = r.Report().Statistics.Power, 1-r.Report().Statistics.Confidence
							for _, e := range r.Report().Expectation {
								if row.expect[e.Name] == nil {
									row.expect[e.Name] = map[assert.Verdict]int{}
									row.order = append(row.order, e.Name)
								}
								row.expect[e.Name][e.Verdict]++
								if !c.broken && e.Verdict != assert.Pass {
									row.failures = append(row.failures, fmt.Sprintf("seed %d, %s: %s — %s", seed, e.Name, e.Verdict, e.Reason))
								}
							}
							if c.broken && r.Report().Verdict != assert.Fail {
								row.failures = append(row.failures, fmt.Sprintf("seed %d: %s (exit %d)", seed, r.Report().Verdict, r.Code))
							}
							mu.Unlock()
							t.Logf("%s seed %d: %s", sc, seed, r.Report().Verdict)
						}
					})
				}
			})
		}
	})
	md, problems := labCalibrationMarkdown(rows, time.Since(start))
	if err := os.WriteFile(*calibrateLabOut, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", *calibrateLabOut)
	for _, p := range problems {
		t.Error(p)
	}
}

// refuted is the one-sided binomial test of a promised rate: the
// probability of k or more events in n runs if each had probability p. A
// value below 0.001 refutes the promise.
func refuted(k, n int, p float64) float64 {
	if k == 0 {
		return 1
	}
	b := distuv.Binomial{N: float64(n), P: p}
	return 1 - b.CDF(float64(k-1))
}

func labCalibrationMarkdown(rows map[string]*verdictCount, took time.Duration) (string, []string) {
	var b strings.Builder
	var problems []string
	fmt.Fprintf(&b, "# Lab calibration\n\nWritten by `make calibrate` (e2e/calibration_test.go) in %s. Every scenario of the\n", took.Round(time.Minute))
	b.WriteString("catalog whose lab routes at random was run on labs brought up with different seeds (`lab up --seed N`,\n")
	b.WriteString("seeds 1000, 1001, …). On the correct mesh each expectation should PASS with the power its scenario\n")
	b.WriteString("was planned for and FAIL at most at α; the p column is the probability of at least that many\n")
	b.WriteString("misses if the promise held (binomial, gonum `distuv`): below 0.001 the promise is refuted. Each\n")
	b.WriteString("broken variant must FAIL on every lab. See docs/statistics.md for the rule and the planner.\n\n")
	b.WriteString("## Correct meshes\n\n| case / scenario | expectation | runs | PASS | INCONCLUSIVE | FAIL | promised | p (not PASS) | p (FAIL) |\n|---|---|---|---|---|---|---|---|---|\n")
	keys := slices.Sorted(maps.Keys(rows))
	var broken []string
	for _, k := range keys {
		r := rows[k]
		if r.broken {
			broken = append(broken, k)
			continue
		}
		for _, e := range r.order {
			v := r.expect[e]
			miss := r.runs - v[assert.Pass]
			pm := refuted(miss, r.runs, 1-r.power)
			pf := refuted(v[assert.Fail], r.runs, r.alpha)
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | PASS ≥ %.0f%%, FAIL ≤ %.0f%% | %.3g | %.3g |\n",
				k, e, r.runs, v[assert.Pass], v[assert.Inconclusive], v[assert.Fail], 100*r.power, 100*r.alpha, pm, pf)
			if pm < 0.001 || pf < 0.001 {
				problems = append(problems, fmt.Sprintf("%s, %s: %d of %d not PASS, %d FAIL: the promise is refuted", k, e, miss, r.runs, v[assert.Fail]))
			}
		}
		if r.runs == 0 {
			problems = append(problems, k+": no run")
		}
	}
	b.WriteString("\n## Broken variants (must FAIL)\n\n| case / scenario | runs | FAIL | INCONCLUSIVE | PASS | expectations that failed |\n|---|---|---|---|---|---|\n")
	for _, k := range broken {
		r := rows[k]
		var failed []string
		for _, e := range r.order {
			if n := r.expect[e][assert.Fail]; n > 0 {
				failed = append(failed, fmt.Sprintf("%s (%d)", e, n))
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", k, r.runs, r.scenario[assert.Fail], r.scenario[assert.Inconclusive], r.scenario[assert.Pass], strings.Join(failed, "; "))
		if r.runs == 0 || r.scenario[assert.Fail] != r.runs {
			problems = append(problems, fmt.Sprintf("%s: %d of %d runs FAIL, want all", k, r.scenario[assert.Fail], r.runs))
		}
	}
	var notes []string
	for _, k := range keys {
		for _, f := range rows[k].failures {
			notes = append(notes, fmt.Sprintf("- %s: %s", k, f))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n## Runs that missed\n\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String(), problems
}

// The binomial tails the calibration judges a promise by, against values
// computed by hand: P(X ≥ 1) = 1 − 0.99²⁰ and P(X ≥ 3) = 1 − Σ_{k<3}
// C(20,k) 0.01^k 0.99^(20−k) for 20 runs at a promised 1% miss rate.
func TestRefutedTails(t *testing.T) {
	for _, c := range []struct {
		k    int
		want float64
	}{{0, 1}, {1, 0.182093}, {3, 0.001003}} {
		if got := refuted(c.k, 20, 0.01); math.Abs(got-c.want) > 5e-6 {
			t.Errorf("P(X ≥ %d | n=20, p=0.01) = %.6f, want %.6f", c.k, got, c.want)
		}
	}
}
