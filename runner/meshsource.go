package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// usesMesh reports whether a split reads its expected shares from the
// mesh's objects (split.fromMesh): the run then connects to every
// declared cluster, where those objects and the pods behind them are.
func usesMesh(sc *scenarios.Scenario) bool { return len(judge.FromMeshSources(sc)) > 0 }

// meshRequest is the attack's request as the mesh's route rules see it
// (docs/expect-from-mesh.md, "Which rule the attack's requests match"):
// its method, path with query, Host and headers. Through a port-forward
// no Host is matched: the attack reaches the entry pod itself, and the
// route the object defines is usually for the call the entry makes to
// its callee through its sidecar (the tutorials' caller → callme), whose
// Host is the callee's, not the forwarded Service's.
func meshRequest(sc *scenarios.Scenario) meshconfig.Request {
	r := meshconfig.Request{Method: sc.Attack.Method, Headers: map[string]string{}}
	if g := sc.Attack.GRPC; g != nil {
		r.Method, r.Path = "POST", g.Method
	}
	if f := sc.Target.Forward; f != nil {
		r.Scheme = f.Scheme
		if r.Path == "" {
			r.Path = sc.Target.Path
		}
	} else if u, err := url.Parse(sc.Target.URL); err == nil {
		r.Scheme, r.Host = u.Scheme, u.Host
		if r.Path == "" {
			r.Path = u.RequestURI()
		}
	}
	if r.Scheme == "" {
		r.Scheme = "http"
	}
	for k, v := range sc.Attack.Headers {
		if strings.EqualFold(k, "Host") {
			r.Host = v
			continue
		}
		r.Headers[k] = v
	}
	return r
}

// readMesh reads, once, the mesh objects every split or mirror with
// fromMesh names
// and derives its expected shares for the attack's requests; conns is the
// concurrency a split that does not say is taken to balance (Skupper).
// Each object read is printed to w with its resourceVersion, and the
// weights and mirrors it defines. A read the
// user is denied, or an object that cannot be read, is an error (a setup
// error for run); objects read that define no split the requests could
// take (no matching rule, an undefined subset) are that split's error,
// for the judge to FAIL it with.
func readMesh(ctx context.Context, sc *scenarios.Scenario, clusters map[string]*kube.Cluster, conns int, w io.Writer) (judge.Mesh, []meshQuery, error) {
	splits := judge.FromMeshSources(sc)
	if len(splits) == 0 {
		return nil, nil, nil
	}
	var cs []*kube.Cluster
	var names []string
	for _, c := range sc.Clusters {
		names = append(names, c.Name)
		if kc := clusters[c.Name]; kc != nil {
			cs = append(cs, kc)
		}
	}
	readers, err := meshconfig.NewReaders(cs)
	if err != nil {
		return nil, nil, err
	}
	if w == nil {
		w = io.Discard
	}
	req := meshRequest(sc)
	out := judge.Mesh{}
	var follow []meshQuery
	for _, s := range splits {
		ref, _, err := s.Source.Ref()
		if err != nil {
			return nil, nil, fmt.Errorf("expectation %q: fromMesh: %w", s.Name, err)
		}
		q := meshconfig.Query{Ref: ref, By: s.By, Clusters: names, Request: req,
			Connections: s.Connections, Selector: s.Source.Selector}
		// Where the requests enter decides which VirtualServices apply:
		// a sidecar's ("mesh") or an ingress gateway's.
		q.Request.Gateway = s.Source.Gateway
		if q.Connections == 0 {
			q.Connections = conns
		}
		mq := meshQuery{name: s.Name, src: s.Source, q: q, readers: readers}
		ex, err := mq.resolve(ctx)
		var rerr resolveError
		if errors.As(err, &rerr) {
			fmt.Fprintf(w, "expectation %q: no expected split from %s: %v\n", s.Name, ref.Object(), rerr.err)
			out[s.Source] = judge.MeshSplit{Err: rerr.err}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, l := range ex.Provenance() {
			fmt.Fprintf(w, "expectation %q: %s\n", s.Name, l)
		}
		fmt.Fprintf(w, "expectation %q: expected split by %s from %s: %s\n", s.Name, ex.By, ref.Object(), judge.FormatShares(ex.Shares))
		out[s.Source] = judge.MeshSplit{Expected: ex}
		if s.Windows != nil && s.Windows.Follow {
			follow = append(follow, mq)
		}
	}
	return out, follow, nil
}

// meshQuery is how one expectation's mesh objects are read and resolved:
// once at the start, and every poll of a split that follows them.
type meshQuery struct {
	name    string
	src     *scenarios.MeshSource
	q       meshconfig.Query
	readers map[string]*meshconfig.Reader
}

// resolveError is an object read that defines no split the requests take:
// the split's error, for the judge to FAIL it with; any other error is a
// read that failed (denied, unreachable).
type resolveError struct{ err error }

func (e resolveError) Error() string { return e.err.Error() }

// resolve reads the objects and derives the expected split.
func (m meshQuery) resolve(ctx context.Context) (meshconfig.Expected, error) {
	objs, err := meshconfig.Fetch(ctx, m.q, m.readers)
	if err != nil {
		return meshconfig.Expected{}, fmt.Errorf("expectation %q: read the expected split: %w", m.name, err)
	}
	ex, err := meshconfig.Resolve(m.q, objs)
	if err != nil {
		return meshconfig.Expected{}, resolveError{err}
	}
	return ex, nil
}

// ReadMesh connects to the scenario's clusters and reads the expected
// splits its fromMesh expectations name, as a run does when it starts:
// for `mesh-verify plan` and `validate` with a kubeconfig. nil when no
// split reads the mesh.
func ReadMesh(ctx context.Context, sc *scenarios.Scenario, o Options, w io.Writer) (judge.Mesh, error) {
	if !usesMesh(sc) {
		return nil, nil
	}
	cfg, err := loadConfig(o)
	if err != nil {
		return nil, err
	}
	var refs []kube.ClusterRef
	for _, c := range sc.Clusters {
		refs = append(refs, kube.ClusterRef{Name: c.Name, Context: c.Context, OfSeveral: len(sc.Clusters) > 1})
	}
	cs, err := cfg.ConnectAll(ctx, refs)
	if err != nil {
		return nil, err
	}
	clusters := map[string]*kube.Cluster{}
	for _, c := range cs {
		clusters[c.Name] = c
	}
	mesh, _, err := readMesh(ctx, sc, clusters, attackConcurrency(measure.AttackConfig(sc, "", "")), w)
	return mesh, err
}
