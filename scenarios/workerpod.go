package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The sidecars attack.pod.sidecar names (docs/distributed.md, Worker pods
// in a mesh).
const (
	SidecarIstio = "istio"
	SidecarKuma  = "kuma"
	SidecarNone  = "none"
)

// The injection annotations that name a sidecar when attack.pod.sidecar
// is left out, with the values that turn injection on (Istio's and Kuma's
// documented pod annotations; Kuma also reads the label of that name).
const (
	IstioInjectKey = "sidecar.istio.io/inject"
	KumaInjectKey  = "kuma.io/sidecar-injection"
)

// Limits of attack.pod: a pod's annotations together are bounded by the
// API server (256 KiB, TotalAnnotationSizeLimitB); the lists are bounded
// so that a typo cannot make a huge pod template.
const (
	MaxWorkerPodAnnotationBytes = 256 << 10
	MaxWorkerPodEntries         = 64
)

// reservedLabel reports a pod label the worker Job sets itself: the
// worker's own (how the coordinator and the sweep find its pods) and the
// Job controller's.
func reservedLabel(k string) bool {
	switch k {
	case "app.kubernetes.io/name", "app.kubernetes.io/component", "job-name", "controller-uid":
		return true
	}
	return strings.HasPrefix(k, "mesh-verify.io/") || strings.HasPrefix(k, "batch.kubernetes.io/")
}

// Sidecar is the sidecar the worker pods run with: attack.pod.sidecar,
// else istio or kuma when the annotations (or, for Kuma, the labels) turn
// injection on, else none.
func (a *Attack) Sidecar() string {
	p := a.Pod
	if p == nil {
		return SidecarNone
	}
	if p.Sidecar != "" {
		return p.Sidecar
	}
	switch {
	case p.Annotations[IstioInjectKey] == "true" || p.Labels[IstioInjectKey] == "true":
		return SidecarIstio
	case p.Annotations[KumaInjectKey] == "enabled" || p.Labels[KumaInjectKey] == "enabled":
		return SidecarKuma
	}
	return SidecarNone
}

// checkWorkerPod validates attack.pod (called for distributed runs only).
func (s *Scenario) checkWorkerPod(c *checker) {
	p := s.Attack.Pod
	if p == nil {
		return
	}
	const at = "attack.pod"
	for _, m := range []struct {
		field string
		kv    map[string]string
	}{{"labels", p.Labels}, {"nodeSelector", p.NodeSelector}} {
		if len(m.kv) > MaxWorkerPodEntries {
			c.add(at+"."+m.field, "%d entries: at most %d", len(m.kv), MaxWorkerPodEntries)
		}
		for _, k := range slices.Sorted(maps.Keys(m.kv)) {
			path := at + "." + m.field + "." + k
			if err := checkLabelKey(k); err != nil {
				c.add(path, "%v", err)
				continue
			}
			if m.field == "labels" && reservedLabel(k) {
				c.add(path, "the worker Job sets this label itself (it is how mesh-verify and the Job controller find the pods): choose another key")
				continue
			}
			if err := checkLabelValue(m.kv[k]); err != nil {
				c.add(path, "%v", err)
			}
		}
	}
	size := 0
	for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
		path := at + ".annotations." + k
		size += len(k) + len(p.Annotations[k])
		switch err := checkLabelKey(k); {
		case err != nil:
			c.add(path, "%s", strings.Replace(err.Error(), "label key", "annotation key", 1))
		case strings.HasPrefix(k, "mesh-verify.io/") || strings.HasPrefix(k, "batch.kubernetes.io/"):
			c.add(path, "the worker Job and the Job controller own the annotations under %s: choose another key", k[:strings.Index(k, "/")+1])
		}
	}
	if size > MaxWorkerPodAnnotationBytes {
		c.add(at+".annotations", "%d bytes together: the API server accepts at most %d", size, MaxWorkerPodAnnotationBytes)
	}
	if len(p.Tolerations) > MaxWorkerPodEntries {
		c.add(at+".tolerations", "%d entries: at most %d", len(p.Tolerations), MaxWorkerPodEntries)
	}
	for i, t := range p.Tolerations {
		checkToleration(c, fmt.Sprintf("%s.tolerations[%d]", at, i), t)
	}
	if len(p.ImagePullSecrets) > MaxWorkerPodEntries {
		c.add(at+".imagePullSecrets", "%d entries: at most %d", len(p.ImagePullSecrets), MaxWorkerPodEntries)
	}
	for i, n := range p.ImagePullSecrets {
		if !isDNSName(n) {
			c.add(fmt.Sprintf("%s.imagePullSecrets[%d]", at, i), "invalid Secret name %q: want lowercase letters, digits, '-' and '.'", n)
		}
	}
	if p.Resources != nil {
		checkResources(c, at+".resources", p.Resources)
	}
	switch p.Sidecar {
	case "", SidecarIstio, SidecarKuma, SidecarNone:
	default:
		c.add(at+".sidecar", "unknown sidecar %q: want istio, kuma or none (left out: from the injection annotations)", p.Sidecar)
	}
}

func checkToleration(c *checker, at string, t Toleration) {
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			c.add(at+".key", "required with operator Equal (an empty key tolerates every taint only with operator Exists)")
		}
	case "Exists":
		if t.Value != "" {
			c.add(at+".value", "must be empty with operator Exists")
		}
	default:
		c.add(at+".operator", "unknown operator %q: want Equal or Exists", t.Operator)
	}
	if t.Key != "" {
		if err := checkLabelKey(t.Key); err != nil {
			c.add(at+".key", "%v", err)
		}
	}
	if err := checkLabelValue(t.Value); err != nil {
		c.add(at+".value", "%v", err)
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		c.add(at+".effect", "unknown effect %q: want NoSchedule, PreferNoSchedule or NoExecute (or nothing: all of them)", t.Effect)
	}
	if t.TolerationSeconds != nil && t.Effect != "NoExecute" {
		c.add(at+".tolerationSeconds", "applies to effect NoExecute only")
	}
}

// checkResources accepts cpu, memory, ephemeral-storage and extended
// resources (a domain-prefixed name such as nvidia.com/gpu), each a
// positive quantity, a request no larger than its limit.
func checkResources(c *checker, at string, r *Resources) {
	parsed := map[string]map[string]resource.Quantity{}
	for _, m := range []struct {
		field string
		kv    map[string]string
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		parsed[m.field] = map[string]resource.Quantity{}
		for _, name := range slices.Sorted(maps.Keys(m.kv)) {
			path := at + "." + m.field + "." + name
			if !slices.Contains([]string{"cpu", "memory", "ephemeral-storage"}, name) && (!strings.Contains(name, "/") || checkLabelKey(name) != nil) {
				c.add(path, "unknown resource %q: want cpu, memory, ephemeral-storage or an extended resource like example.com/gpu", name)
				continue
			}
			q, err := resource.ParseQuantity(m.kv[name])
			if err != nil || q.Sign() <= 0 {
				c.add(path, "invalid quantity %q: want a positive Kubernetes quantity like 500m, 2 or 256Mi", m.kv[name])
				continue
			}
			parsed[m.field][name] = q
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req, ok1 := parsed["requests"][name]
		lim, ok2 := parsed["limits"][name]
		if ok1 && ok2 && req.Cmp(lim) > 0 {
			c.add(at+".requests."+name, "request %s is more than the limit %s", req.String(), lim.String())
		}
	}
}
