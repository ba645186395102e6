package kwok_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// TestConfigQuotesTheKubectlPath: the kubectl path goes into the YAML as
// one quoted scalar, whatever it holds.
func TestConfigQuotesTheKubectlPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/b/kubectl", `/tmp/a dir: "x" #y/kubectl`} {
		var conf struct {
			Kind    string `yaml:"kind"`
			Options struct {
				KubectlBinary     string `yaml:"kubectlBinary"`
				KubeRuntimeConfig string `yaml:"kubeRuntimeConfig"`
			} `yaml:"options"`
			ComponentsPatches []struct {
				Name string `yaml:"name"`
			} `yaml:"componentsPatches"`
		}
		if err := yaml.Unmarshal([]byte(kwok.Config(p)), &conf); err != nil {
			t.Fatalf("kubectl %q: %v", p, err)
		}
		if conf.Kind != "KwokctlConfiguration" || conf.Options.KubectlBinary != p || conf.Options.KubeRuntimeConfig == "" || len(conf.ComponentsPatches) == 0 {
			t.Errorf("kubectl %q: %+v", p, conf)
		}
	}
}

// TestClusterServesWhatTheLabUses: a lab cluster, trimmed by kwokctl.yaml,
// still serves every resource the lab, its tests and mesh-verify use, and
// no longer the APIs it leaves out; its components run with the settings
// the file gives.
func TestClusterServesWhatTheLabUses(t *testing.T) {
	l := labtest.Clusters(t, "c1")
	cfg, err := clientcmd.BuildConfigFromFlags("", l.ClusterKubeconfig("c1"))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			served[l.GroupVersion+"/"+r.Name] = true
		}
	}
	for _, r := range []string{
		"v1/pods", "v1/pods/log", "v1/pods/portforward", "v1/services", "v1/endpoints", "v1/configmaps",
		"v1/secrets", "v1/serviceaccounts", "v1/serviceaccounts/token", "v1/namespaces", "v1/events", "v1/nodes",
		"apps/v1/deployments", "apps/v1/deployments/scale", "apps/v1/replicasets", "batch/v1/jobs",
		"discovery.k8s.io/v1/endpointslices", "coordination.k8s.io/v1/leases", "events.k8s.io/v1/events",
		"rbac.authorization.k8s.io/v1/roles", "rbac.authorization.k8s.io/v1/rolebindings",
		"rbac.authorization.k8s.io/v1/clusterroles", "rbac.authorization.k8s.io/v1/clusterrolebindings",
		"authorization.k8s.io/v1/subjectaccessreviews", "authorization.k8s.io/v1/selfsubjectaccessreviews",
		"authentication.k8s.io/v1/selfsubjectreviews", "apiextensions.k8s.io/v1/customresourcedefinitions",
		"networking.k8s.io/v1/ipaddresses", "networking.k8s.io/v1/servicecidrs",
		"policy/v1/poddisruptionbudgets", "storage.k8s.io/v1/csinodes", "scheduling.k8s.io/v1/priorityclasses",
		"kwok.x-k8s.io/v1alpha1/logs", "kwok.x-k8s.io/v1alpha1/portforwards",
	} {
		if !served[r] {
			t.Errorf("%s is not served", r)
		}
	}
	for _, r := range []string{
		"autoscaling/v2/horizontalpodautoscalers", "batch/v1/cronjobs", "networking.k8s.io/v1/ingresses",
		"certificates.k8s.io/v1/certificatesigningrequests", "flowcontrol.apiserver.k8s.io/v1/flowschemas",
		"admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "node.k8s.io/v1/runtimeclasses",
	} {
		if served[r] {
			t.Errorf("%s is served; kwokctl.yaml leaves it out", r)
		}
	}
	// The components as kwokctl started them.
	for _, c := range []struct {
		component string
		args, env []string
	}{
		{"kube-apiserver", []string{"--authorization-mode=RBAC", "--enable-priority-and-fairness=false"}, []string{"GOGC=400"}},
		{"kube-controller-manager", []string{"--controllers=deployment-controller,"}, []string{"GOGC=400"}},
		{"kube-scheduler", []string{"--leader-elect=false"}, []string{"GOGC=400"}},
		{"etcd", nil, []string{"GOGC=400"}},
	} {
		dir := filepath.Join(l.Dir, "kwok", "clusters", "c1")
		b, err := os.ReadFile(filepath.Join(dir, "pids", c.component+".pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := kwok.ReadProc(pid)
		if !ok {
			t.Fatalf("%s (pid %d) is not running", c.component, pid)
		}
		for _, want := range c.args {
			if !slices.ContainsFunc(p.Args, func(a string) bool { return strings.HasPrefix(a, want) }) {
				t.Errorf("%s runs without %s: %q", c.component, want, p.Args)
			}
		}
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			t.Fatal(err)
		}
		env := strings.Split(string(environ), "\x00")
		for _, want := range c.env {
			// The last one wins, as a process's getenv sees it.
			k := strings.SplitN(want, "=", 2)[0] + "="
			last := ""
			for _, e := range env {
				if strings.HasPrefix(e, k) {
					last = e
				}
			}
			if last != want {
				t.Errorf("%s's environment has %q, want %s", c.component, last, want)
			}
		}
	}
}
