package meshconfig

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Cilium's Cluster Mesh annotations on a Service, each with the legacy
// name Cilium still reads (pkg/annotation/k8s.go). lab/meshroute reads
// the same annotations on purpose with code of its own, as it does the
// other meshes' objects: the lab routes from its reading and the run
// expects from this one, so a misreading shared by both could not make a
// lab test fail.
var (
	ciliumGlobal   = []string{"service.cilium.io/global", "io.cilium/global-service"}
	ciliumShared   = []string{"service.cilium.io/shared", "io.cilium/shared-service"}
	ciliumAffinity = []string{"service.cilium.io/affinity", "io.cilium/service-affinity"}
)

// ciliumAnnotation is the first of names set on o.
func ciliumAnnotation(o *obj, names []string) (value, path string, ok bool) {
	for _, n := range names {
		if v, ok := o.u.GetAnnotations()[n]; ok {
			path = "metadata.annotations." + n
			o.use(path)
			return v, path, true
		}
	}
	return "", "", false
}

func ciliumBool(o *obj, names []string, def bool) (bool, error) {
	v, path, ok := ciliumAnnotation(o, names)
	if !ok {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, o.errf(path, "%q: want \"true\" or \"false\"", v)
}

// resolveCilium reads a Cluster Mesh global service: the Service's
// annotations in the cluster the traffic enters and in the others, and
// the ready pods its selector picks in each (Cilium's backends). Not
// global: local backends only. Global: plus those of each cluster whose
// Service is global and shared (the default); affinity local uses the
// remote ones only while no local backend is ready, remote the other way
// round, none all alike. Cilium picks a backend per connection, evenly
// (random algorithm), so a cluster's share is its ready pods over all
// the selected ones (pkg/clustermesh/loadbalancer/selectbackends.go).
func resolveCilium(q Query, objs Objects) (Expected, error) {
	if err := needBy(q, ByCluster); err != nil {
		return Expected{}, err
	}
	local, ns := q.cluster(), q.Ref.Namespace
	u := objs.find(local, KindService, ns, q.Ref.Name)
	if u == nil {
		return Expected{}, notFound(q)
	}
	lo := newObj(u, local)
	var e Expected
	global, err := ciliumBool(lo, ciliumGlobal, false)
	if err != nil {
		return Expected{}, err
	}
	used := []*obj{lo}
	pods := map[string]int{}
	count := func(o *obj) (int, error) {
		sel, err := o.root().get("spec").get("selector").strMap()
		if err != nil {
			return 0, err
		}
		o.use("spec.selector")
		if len(sel) == 0 {
			return 0, o.errf("spec.selector", "empty: the Service's backends are not pods mesh-verify can count")
		}
		return len(readyPods(objs, o.cluster, ns, labels.SelectorFromSet(sel))), nil
	}
	if pods[local], err = count(lo); err != nil {
		return Expected{}, err
	}
	var remote []string
	if global {
		for _, c := range q.Clusters {
			if c == local {
				continue
			}
			ru := objs.find(c, KindService, ns, q.Ref.Name)
			if ru == nil {
				e.Explanation = append(e.Explanation, fmt.Sprintf("cluster %s has no Service %s/%s: it shares no backends", c, ns, q.Ref.Name))
				continue
			}
			ro := newObj(ru, c)
			g, err := ciliumBool(ro, ciliumGlobal, false)
			if err != nil {
				return Expected{}, err
			}
			shared, err := ciliumBool(ro, ciliumShared, true)
			if err != nil {
				return Expected{}, err
			}
			used = append(used, ro)
			if !g || !shared {
				e.Explanation = append(e.Explanation, fmt.Sprintf("cluster %s: Service %s/%s is not global and shared, so its backends are not used", c, ns, q.Ref.Name))
				continue
			}
			if pods[c], err = count(ro); err != nil {
				return Expected{}, err
			}
			remote = append(remote, c)
		}
	} else {
		e.Explanation = append(e.Explanation, fmt.Sprintf("Service %s/%s in cluster %s is not global: its own backends only", ns, q.Ref.Name, local))
	}
	remoteReady := 0
	for _, c := range remote {
		remoteReady += pods[c]
	}
	aff, path, _ := ciliumAnnotation(lo, ciliumAffinity)
	chosen := map[string]int{}
	pick := func(cs ...string) {
		for _, c := range cs {
			chosen[c] = pods[c]
		}
	}
	switch aff {
	case "", "none":
		pick(local)
		pick(remote...)
	case "local":
		if pods[local] > 0 || remoteReady == 0 {
			pick(local)
		} else {
			pick(remote...)
		}
		e.Explanation = append(e.Explanation, "affinity local: remote backends are used only while the local cluster has no ready backend")
	case "remote":
		if remoteReady > 0 {
			pick(remote...)
		} else {
			pick(local)
		}
		e.Explanation = append(e.Explanation, "affinity remote: local backends are used only while no remote cluster has a ready backend")
	default:
		return Expected{}, lo.errf(path, "%q: want local, remote or none", aff)
	}
	s, err := assert.EqualPerPodModel(chosen)
	if err != nil {
		return Expected{}, fmt.Errorf("%s in cluster %s (ready backends %v): %w", q.Ref.Object(), local, pods, err)
	}
	e.Shares, e.Model = s.Shares, s.Model
	for _, c := range append([]string{local}, remote...) {
		if _, ok := e.Shares[c]; !ok {
			e.Shares[c] = 0
		}
	}
	e.Explanation = append(e.Explanation, s.Explanation...)
	e.Explanation = append(e.Explanation, "Cilium picks a backend per connection: with keep-alive the draws are the connections, not the requests")
	for _, o := range used {
		e.Sources = append(e.Sources, o.source())
	}
	e.Backends, e.BackendsOf = pods, "Service "+ns+"/"+q.Ref.Name
	return e, nil
}
