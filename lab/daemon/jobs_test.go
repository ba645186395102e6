package daemon

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsJobImage(t *testing.T) {
	for image, want := range map[string]bool{
		"ghcr.io/mesh-verify/mesh-verify:v0.1.0":       true,
		"ghcr.io/mesh-verify/mesh-verify:test":         true,
		"mesh-verify":                                  true,
		"localhost:5000/mesh-verify":                   true,
		"localhost:5000/x/mesh-verify@sha256:0123abcd": true,
		"ghcr.io/mesh-verify/mesh-verify-worker:v1":    false,
		"ghcr.io/mesh-verify/not-mesh-verify:v1":       false,
		"mesh-verify.io/echo:mesh-verify":              false,
		"localhost:5000/echo":                          false,
		"ghcr.io/mesh-verify/mesh-verify/extra:v1":     false,
	} {
		if got := isJobImage(image); got != want {
			t.Errorf("isJobImage(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"IDX": "2", "EMPTY": ""}
	for in, want := range map[string]string{
		"w$(IDX)":        "w2",
		"$(IDX)$(IDX)":   "22",
		"$$(IDX)":        "$(IDX)",
		"$(UNSET)":       "$(UNSET)",
		"a$(EMPTY)b":     "ab",
		"cost $5":        "cost $5",
		"trailing $":     "trailing $",
		"$(unclosed":     "$(unclosed",
		"$$$(IDX)":       "$2",
		"no vars at all": "no vars at all",
	} {
		if got := expandVars(in, vars); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzExpandVars(f *testing.F) {
	for _, s := range []string{"w$(IDX)", "$$", "$(", "$()", "$(IDX", "x$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := expandVars(s, map[string]string{"IDX": "7"})
		if !strings.Contains(s, "$") && out != s {
			t.Fatalf("%q without $ became %q", s, out)
		}
		if !strings.Contains(s, "$$") && !strings.Contains(s, "IDX") && out != s {
			t.Fatalf("%q references no variable but became %q", s, out)
		}
	})
}

func TestJobEnv(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "demo", UID: "u-1",
			Labels:      map[string]string{"batch.kubernetes.io/job-completion-index": "0"},
			Annotations: map[string]string{"a": "b"}},
		Spec:   corev1.PodSpec{NodeName: "node-c1"},
		Status: corev1.PodStatus{PodIP: "10.0.0.7"},
	}
	ref := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	c := &corev1.Container{Name: "worker", Env: []corev1.EnvVar{
		{Name: "LIT", Value: "x"},
		{Name: "IDX", ValueFrom: ref("metadata.labels['batch.kubernetes.io/job-completion-index']")},
		{Name: "A", ValueFrom: ref("metadata.annotations['a']")},
		{Name: "MISSING", ValueFrom: ref("metadata.annotations['nope']")},
		{Name: "N", ValueFrom: ref("metadata.name")}, {Name: "NS", ValueFrom: ref("metadata.namespace")},
		{Name: "U", ValueFrom: ref("metadata.uid")}, {Name: "NODE", ValueFrom: ref("spec.nodeName")},
		{Name: "IP", ValueFrom: ref("status.podIP")},
	}}
	got, err := jobEnv(pod, c)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"LIT", "x"}, {"IDX", "0"}, {"A", "b"}, {"MISSING", ""}, {"N", "w-0"}, {"NS", "demo"}, {"U", "u-1"}, {"NODE", "node-c1"}, {"IP", "10.0.0.7"}}
	if len(got) != len(want) {
		t.Fatalf("jobEnv = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("jobEnv[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []struct {
		c    corev1.Container
		want string
	}{
		{corev1.Container{Name: "w", Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}},
			"container w: env T: valueFrom.secretKeyRef is not supported by the lab"},
		{corev1.Container{Name: "w", Env: []corev1.EnvVar{{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}},
			"env C: valueFrom.configMapKeyRef is not supported"},
		{corev1.Container{Name: "w", Env: []corev1.EnvVar{{Name: "R", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}},
			"env R: valueFrom.resourceFieldRef is not supported"},
		{corev1.Container{Name: "w", Env: []corev1.EnvVar{{Name: "S", ValueFrom: ref("spec.serviceAccountName")}}},
			`env S: valueFrom.fieldRef.fieldPath "spec.serviceAccountName" is not supported by the lab`},
		{corev1.Container{Name: "w", Env: []corev1.EnvVar{{Name: "L", ValueFrom: ref("metadata.labels['x'")}}},
			`env L: valueFrom.fieldRef.fieldPath "metadata.labels['x'" is not supported`},
		{corev1.Container{Name: "w", EnvFrom: []corev1.EnvFromSource{{}}}, "container w: envFrom is not supported by the lab"},
	} {
		if _, err := jobEnv(pod, &bad.c); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("jobEnv(%+v) = %v, want an error containing %q", bad.c.Env, err, bad.want)
		}
	}
}
