package runner

import (
	"errors"

	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// NeedsIn is Needs for a run given -n namespace: namespace fills every
// namespace the scenario leaves unset, as Run does (README.md, RBAC).
func NeedsIn(sc *scenarios.Scenario, namespace string) []access.Need {
	return Needs(withNamespace(sc, namespace))
}

// Needs lists what a run of sc does in which cluster and namespace, as
// openKube, start and scrapeAll do it: access.PermissionsFor says which
// permissions each need takes (`mesh-verify rbac SCENARIO`). A scenario
// with a plain URL target and nothing observed needs none.
func Needs(sc *scenarios.Scenario) []access.Need {
	var out []access.Need
	add := func(n access.Need) {
		for _, have := range out {
			if have == n {
				return
			}
		}
		out = append(out, n)
	}
	used := map[string]bool{}
	if sc.Attack.Workers > 0 {
		// The workers attack from inside the clusters: a Job, its
		// ConfigMap and its pods' logs in each source instead of a tunnel
		// (fleet/coordinator.go).
		for _, src := range sc.Attack.WorkerSources() {
			used[src.Cluster] = true
			for _, n := range access.WorkerNeeds(src.Cluster, fleet.Namespace(sc), src.Workers) {
				add(n)
			}
		}
	} else if f := sc.Target.Forward; f != nil {
		used[f.Cluster] = true
		kind := ""
		if t, err := portforward.ParseTarget(f.Resource, f.Port); err == nil {
			kind = t.Kind
		}
		add(access.Need{Cluster: f.Cluster, Namespace: f.Namespace, Feature: access.FeatureTunnel, TargetKind: kind})
	}
	for _, w := range sc.Observe {
		for _, c := range w.Clusters {
			used[c] = true
			add(access.Need{Cluster: c, Namespace: w.Namespace, Feature: access.FeatureNamespaceCheck})
			add(access.Need{Cluster: c, Namespace: w.Namespace, Feature: access.FeatureInventory})
			if w.Logs != nil {
				add(access.Need{Cluster: c, Namespace: w.Namespace, Feature: access.FeatureLogs})
				if readsUpstream(w.Logs) {
					add(access.Need{Cluster: c, Feature: access.FeatureGateways})
				}
			}
			if w.Metrics != nil {
				f := access.FeatureMetricsProxy
				if w.Metrics.Via == scenarios.MetricsViaPortForward {
					f = access.FeatureMetricsPortForward
				}
				add(access.Need{Cluster: c, Namespace: w.Namespace, Feature: f})
			}
		}
	}
	for _, m := range judge.MeshSources(sc) {
		if ref, _, err := m.Ref(); err == nil {
			for _, n := range meshconfig.Needs(ref, sc.ClusterNames()) {
				used[n.Cluster] = true
				add(n)
			}
		}
	}
	for _, c := range sc.Clusters {
		if used[c.Name] {
			add(access.Need{Cluster: c.Name, Feature: access.FeatureConnect})
		}
	}
	return out
}

// noteDenied keeps err when it is the API server denying a call (a
// permission or the credentials missing) during or after the attack: the
// run then ends as a setup error, not as a verdict judged without that
// source (README.md, RBAC).
func (kp *kubePath) noteDenied(err error) {
	if kube.IsDenied(err) {
		kp.deniedErrs = append(kp.deniedErrs, err)
	}
}

// denied is every denial noted, joined; nil when there was none.
func (kp *kubePath) denied() error {
	if kp == nil {
		return nil
	}
	return errors.Join(kp.deniedErrs...)
}
