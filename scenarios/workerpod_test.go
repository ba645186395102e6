package scenarios

import "testing"

func TestWorkerPodFields(t *testing.T) {
	t.Parallel()
	const base = "rate: 10, requests: 100, workers: 2, "
	for _, c := range []struct {
		name, pod string
		want      string // "line:field: substring", or "" for valid
	}{
		{"full", `{labels: {team: load, app: mv}, annotations: {sidecar.istio.io/inject: "true", "proxy.istio.io/config": "{}"}, nodeSelector: {kubernetes.io/os: linux}, tolerations: [{key: dedicated, operator: Equal, value: load, effect: NoSchedule}, {operator: Exists, effect: NoExecute, tolerationSeconds: 30}], resources: {requests: {cpu: 500m, memory: 128Mi}, limits: {cpu: "4", memory: 1Gi, example.com/gpu: "1"}}, imagePullSecrets: [regcred], sidecar: istio}`, ""},
		{"empty", `{}`, ""},
		{"bad label key", `{labels: {"-bad": x}}`, `6:attack.pod.labels.-bad: invalid label key "-bad"`},
		{"bad label value", `{labels: {team: "a b"}}`, `6:attack.pod.labels.team: invalid label value "a b"`},
		{"own label", `{labels: {app.kubernetes.io/name: other}}`, "6:attack.pod.labels.app.kubernetes.io/name: the worker Job sets this label itself"},
		{"run label", `{labels: {mesh-verify.io/run: x}}`, "6:attack.pod.labels.mesh-verify.io/run: the worker Job sets this label itself"},
		{"job label", `{labels: {batch.kubernetes.io/job-name: x}}`, "6:attack.pod.labels.batch.kubernetes.io/job-name: the worker Job sets this label itself"},
		{"bad annotation key", `{annotations: {"a b": x}}`, `6:attack.pod.annotations.a b: invalid annotation key "a b"`},
		{"own annotation", `{annotations: {mesh-verify.io/stop: "true"}}`, "6:attack.pod.annotations.mesh-verify.io/stop: the worker Job and the Job controller own the annotations under mesh-verify.io/"},
		{"bad node selector", `{nodeSelector: {zone: "x/y"}}`, `6:attack.pod.nodeSelector.zone: invalid label value "x/y"`},
		{"toleration operator", `{tolerations: [{key: a, operator: Near}]}`, `6:attack.pod.tolerations[0].operator: unknown operator "Near"`},
		{"toleration exists with value", `{tolerations: [{key: a, operator: Exists, value: b}]}`, "6:attack.pod.tolerations[0].value: must be empty with operator Exists"},
		{"toleration equal without key", `{tolerations: [{value: b}]}`, "6:attack.pod.tolerations[0].key: required with operator Equal"},
		{"toleration effect", `{tolerations: [{key: a, effect: NoRun}]}`, `6:attack.pod.tolerations[0].effect: unknown effect "NoRun"`},
		{"toleration seconds", `{tolerations: [{key: a, effect: NoSchedule, tolerationSeconds: 5}]}`, "6:attack.pod.tolerations[0].tolerationSeconds: applies to effect NoExecute only"},
		{"bad quantity", `{resources: {requests: {cpu: lots}}}`, `6:attack.pod.resources.requests.cpu: invalid quantity "lots"`},
		{"zero quantity", `{resources: {limits: {memory: "0"}}}`, `6:attack.pod.resources.limits.memory: invalid quantity "0"`},
		{"unknown resource", `{resources: {requests: {gpu: "1"}}}`, `6:attack.pod.resources.requests.gpu: unknown resource "gpu"`},
		{"request over limit", `{resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}}`, "6:attack.pod.resources.requests.memory: request 2Gi is more than the limit 1Gi"},
		{"bad pull secret", `{imagePullSecrets: [Reg_Cred]}`, `6:attack.pod.imagePullSecrets[0]: invalid Secret name "Reg_Cred"`},
		{"bad sidecar", `{sidecar: linkerd}`, `6:attack.pod.sidecar: unknown sidecar "linkerd": want istio, kuma or none`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("w.yaml", []byte(workersDoc(svcTarget, "{"+base+"pod: "+c.pod+"}")))
			wantParseError(t, err, c.want)
		})
	}
	t.Run("pod without workers", func(t *testing.T) {
		t.Parallel()
		_, err := Parse("w.yaml", []byte(workersDoc(svcTarget, "{rate: 10, requests: 100, pod: {labels: {a: b}}}")))
		wantParseError(t, err, "6:attack.pod: applies to distributed runs only")
	})
}

func TestAttackSidecar(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		pod  *WorkerPod
		want string
	}{
		{"no pod", nil, SidecarNone},
		{"explicit", &WorkerPod{Sidecar: SidecarKuma, Annotations: map[string]string{IstioInjectKey: "true"}}, SidecarKuma},
		{"explicit none", &WorkerPod{Sidecar: SidecarNone, Annotations: map[string]string{IstioInjectKey: "true"}}, SidecarNone},
		{"istio annotation", &WorkerPod{Annotations: map[string]string{IstioInjectKey: "true"}}, SidecarIstio},
		{"istio off", &WorkerPod{Annotations: map[string]string{IstioInjectKey: "false"}}, SidecarNone},
		{"istio label", &WorkerPod{Labels: map[string]string{IstioInjectKey: "true"}}, SidecarIstio},
		{"kuma annotation", &WorkerPod{Annotations: map[string]string{KumaInjectKey: "enabled"}}, SidecarKuma},
		{"kuma label", &WorkerPod{Labels: map[string]string{KumaInjectKey: "enabled"}}, SidecarKuma},
		{"nothing", &WorkerPod{Labels: map[string]string{"team": "x"}}, SidecarNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := Attack{Pod: c.pod}
			if got := a.Sidecar(); got != c.want {
				t.Fatalf("Sidecar() = %q, want %q", got, c.want)
			}
		})
	}
}
