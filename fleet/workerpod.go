package fleet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// workerPodTemplate is attack.pod as the worker Job's pod template takes
// it. The scenario was validated: an error here is a quantity that
// validation let through, named by its field.
func workerPodTemplate(a *scenarios.Attack) (kube.WorkerPodTemplate, error) {
	var t kube.WorkerPodTemplate
	// The worker follows the sidecar's lifecycle (its --sidecar).
	switch a.Sidecar() {
	case scenarios.SidecarIstio:
		t.Sidecar = kube.SidecarIstio
	case scenarios.SidecarKuma:
		t.Sidecar = kube.SidecarKuma
	}
	p := a.Pod
	if p == nil {
		return t, nil
	}
	t.Labels, t.Annotations, t.NodeSelector, t.ImagePullSecrets = p.Labels, p.Annotations, p.NodeSelector, p.ImagePullSecrets
	for _, tol := range p.Tolerations {
		t.Tolerations = append(t.Tolerations, corev1.Toleration{
			Key: tol.Key, Operator: corev1.TolerationOperator(tol.Operator), Value: tol.Value,
			Effect: corev1.TaintEffect(tol.Effect), TolerationSeconds: tol.TolerationSeconds,
		})
	}
	if p.Resources == nil {
		return t, nil
	}
	list := func(field string, m map[string]string) (corev1.ResourceList, error) {
		if len(m) == 0 {
			return nil, nil
		}
		out := corev1.ResourceList{}
		for name, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("attack.pod.resources.%s.%s: %q: %w", field, name, v, err)
			}
			out[corev1.ResourceName(name)] = q
		}
		return out, nil
	}
	var err error
	if t.Resources.Requests, err = list("requests", p.Resources.Requests); err != nil {
		return t, err
	}
	t.Resources.Limits, err = list("limits", p.Resources.Limits)
	return t, err
}
