package judge

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/tally"
)

// A split with fromMesh is judged against the shares the run read from
// the mesh, and its model names the object and its resourceVersion; not
// read, or read into an error, it FAILs saying why.
func TestSplitFromMesh(t *testing.T) {
	t.Parallel()
	sc := parse(t, meshTestHeader+`expect:
  - split: {by: version, fromMesh: {virtualService: demo/reviews}, margin: 5%}
`)
	ex := meshconfig.Expected{
		Ref: meshconfig.Ref{Kind: meshconfig.KindVirtualService, Namespace: "demo", Name: "reviews"}, By: "version",
		Shares: map[string]float64{"v1": 0.8, "v2": 0.2}, Weights: map[string]float64{"v1": 80, "v2": 20},
		Model: assert.ModelWeights, Rule: "spec.http[0]",
		Sources: []meshconfig.Source{{Cluster: "c1", APIVersion: "networking.istio.io/v1", Kind: "VirtualService",
			Namespace: "demo", Name: "reviews", ResourceVersion: "4711", Fields: []string{"spec.http[0].route[1].weight"}}},
	}
	counts := func(v1, v2 int64) fakeEvidence {
		return fakeEvidence{counts: tally.Snapshot{Total: v1 + v2,
			Dimensions: map[string]assert.Counts{"version": {Buckets: []string{"v1", "v2"}, N: []int64{v1, v2}}}}}
	}
	sp := sc.Expect[0].Split
	for _, c := range []struct {
		name string
		mesh Mesh
		ev   fakeEvidence
		want assert.Verdict
		// reason or, for a PASS or FAIL against the shares, the model's
		// explanation holds each of these.
		has []string
	}{
		{"as read", Mesh{sp.FromMesh: {Expected: ex}}, counts(800, 200), assert.Pass,
			[]string{"VirtualService demo/reviews in cluster c1 (resourceVersion 4711)", "weights v1=80, v2=20", "spec.http[0].route[1].weight"}},
		{"not as read", Mesh{sp.FromMesh: {Expected: ex}}, counts(500, 500), assert.Fail, []string{"resourceVersion 4711"}},
		{"not read", nil, counts(800, 200), assert.Fail, []string{"were not read"}},
		{"read into an error", Mesh{sp.FromMesh: {Err: errors.New(`field spec.http: no route matches`)}}, counts(800, 200), assert.Fail,
			[]string{"from VirtualService demo/reviews: field spec.http: no route matches"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := New(sc, Attack{Connections: 1}).WithMesh(c.mesh)
			r := j.Evaluate(c.ev, -1, 0)[0]
			if r.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s", r.Verdict, r.Reason, c.want)
			}
			text := r.Reason
			if r.Model != nil {
				text += "\n" + r.Model.Model + "\n" + strings.Join(r.Model.Explanation, "\n")
				if r.Model.Shares["v2"] != 0.2 {
					t.Errorf("model shares %v, want the mesh's", r.Model.Shares)
				}
			}
			for _, h := range c.has {
				if !strings.Contains(text, h) {
					t.Errorf("judgement lacks %q:\n%s", h, text)
				}
			}
		})
	}
}

// A mirror with fromMesh is judged at the percentage the object mirrors,
// and says where it was read; several mirrors need the percent given.
func TestMirrorFromMesh(t *testing.T) {
	t.Parallel()
	sc := parse(t, meshTestHeader+`observe:
  - {name: v2, namespace: demo, selector: app=x, clusters: [c1], logs: {match: 'id=(?P<request_id>\S+)'}}
expect:
  - mirror: {to: v2, fromMesh: {virtualService: demo/reviews}, margin: 5%}
`)
	src := sc.Expect[0].Mirror.FromMesh
	ex := meshconfig.Expected{Rule: "spec.http[0]", Mirrors: []meshconfig.Mirror{{Bucket: "v2", Percent: 50, Field: "spec.http[0].mirrorPercentage.value"}},
		Sources: []meshconfig.Source{{Cluster: "c1", Kind: "VirtualService", Namespace: "demo", Name: "reviews", ResourceVersion: "99"}}}
	two := ex
	two.Mirrors = append(slices.Clone(ex.Mirrors), meshconfig.Mirror{Bucket: "v3", Percent: 10})
	for _, c := range []struct {
		name string
		mesh Mesh
		k    int64
		want assert.Verdict
		has  string
	}{
		{"at the object's 50%", Mesh{src: {Expected: ex}}, 500, assert.Pass, "resourceVersion 99"},
		{"not at it", Mesh{src: {Expected: ex}}, 100, assert.Fail, "resourceVersion 99"},
		{"two mirrors", Mesh{src: {Expected: two}}, 500, assert.Fail, "mirrors to 2 destinations"},
		{"not read", nil, 500, assert.Fail, "was not read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := New(sc, Attack{Connections: 1}).WithMesh(c.mesh)
			r := j.Evaluate(fakeEvidence{mirror: MirrorCount{K: c.k, N: 1000, Basis: "primaries"}}, -1, 0)[0]
			text := r.Reason
			if r.Model != nil {
				text += "\n" + strings.Join(r.Model.Explanation, "\n")
			}
			if r.Verdict != c.want || !strings.Contains(text, c.has) {
				t.Fatalf("verdict %s, want %s with %q:\n%s", r.Verdict, c.want, c.has, text)
			}
		})
	}
}

// meshTestHeader is a scenario up to its observe and expect sections.
const meshTestHeader = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters: [{name: c1, context: kind-c1}]
target: {url: "http://127.0.0.1:1/"}
attack: {concurrency: 1, requests: 1000, keepAlive: false}
attribution: {preset: tutorial}
`
