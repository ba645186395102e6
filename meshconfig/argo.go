package meshconfig

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/labels"
)

// ArgoHashLabel is the label Argo Rollouts puts on every pod (and
// ReplicaSet) of a revision: the pod template's hash, which
// status.canary.weights names (v1alpha1.DefaultRolloutUniqueLabelKey).
const ArgoHashLabel = "rollouts-pod-template-hash"

// resolveRollout reads an Argo Rollouts Rollout's status.canary.weights:
// the weights Argo recorded after it set them on the traffic router, per
// ReplicaSet (canary, stable and any additional destinations of an
// experiment), each resolved through its podTemplateHash to the version
// of its ready pods. It is what Argo set, not what the mesh does: the
// data plane is checked by the split's observation.
func resolveRollout(q Query, objs Objects) (Expected, error) {
	if err := needBy(q, ByVersion); err != nil {
		return Expected{}, err
	}
	cl := q.cluster()
	u := objs.find(cl, KindRollout, q.Ref.Namespace, q.Ref.Name)
	if u == nil {
		return Expected{}, notFound(q)
	}
	ro := newObj(u, cl)
	ws := ro.root().get("status").get("canary").get("weights")
	if _, err := ws.object(); err != nil {
		return Expected{}, err
	}
	if ws.missing() {
		return Expected{}, ws.errf("not set: Argo records the weights only for a canary with trafficRouting and while it is in progress (without trafficRouting setWeight is approximated by replica counts: give the split's weights instead)")
	}
	dests := []node{ws.get("canary"), ws.get("stable")}
	extra, err := ws.get("additional").list()
	if err != nil {
		return Expected{}, err
	}
	dests = append(dests, extra...)
	var e Expected
	weights := map[string]float64{}
	vl := q.versionLabel()
	for _, d := range dests {
		if _, err := d.object(); err != nil {
			return Expected{}, err
		}
		if d.missing() {
			return Expected{}, d.errf("missing: Argo records the canary's and the stable's weight")
		}
		w, set, err := d.get("weight").num()
		if err != nil {
			return Expected{}, err
		}
		if !set || w < 0 || w != math.Trunc(w) || w > math.MaxInt32 {
			return Expected{}, d.get("weight").errf("%v: want a whole number >= 0", d.get("weight").v)
		}
		ro.use(d.path + ".weight")
		hash, err := d.get("podTemplateHash").str()
		if err != nil {
			return Expected{}, err
		}
		if hash == "" {
			return Expected{}, d.get("podTemplateHash").errf("empty: the ReplicaSet's pods cannot be told")
		}
		if _, err := labels.ValidatedSelectorFromSet(labels.Set{ArgoHashLabel: hash}); err != nil {
			return Expected{}, d.get("podTemplateHash").errf("%q: %v", hash, err)
		}
		ro.use(d.path + ".podTemplateHash")
		vs, count := podVersions(objs, []string{cl}, q.Ref.Namespace, labels.SelectorFromSet(labels.Set{ArgoHashLabel: hash}), vl)
		switch {
		case count == 0 && w == 0:
			e.Explanation = append(e.Explanation, fmt.Sprintf("%s: weight 0 and no ready pod with %s=%s: it takes nothing", d.path, ArgoHashLabel, hash))
			continue
		case count == 0:
			return Expected{}, d.errf("weight %g but no ready pod in namespace %s of cluster %s has %s=%s: its share would fail, not move elsewhere", w, q.Ref.Namespace, cl, ArgoHashLabel, hash)
		case len(vs) != 1 || vs[0] == "":
			return Expected{}, d.errf("the ready pods with %s=%s carry versions %q (pod label %s): want one version", ArgoHashLabel, hash, vs, vl)
		}
		e.Explanation = append(e.Explanation, fmt.Sprintf("%s: weight %g, %s=%s: its %d ready pods are all version %s", d.path, w, ArgoHashLabel, hash, count, vs[0]))
		weights[vs[0]] += w
	}
	if err := weighted(&e, weights); err != nil {
		return Expected{}, ws.errf("%v", err)
	}
	e.Sources = []Source{ro.source()}
	return e, nil
}
