package access

import (
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestPermissionsAreWellFormed(t *testing.T) {
	verbs := []string{"get", "list", "watch", "create", "patch", "delete"}
	seen := map[Feature]bool{}
	for _, p := range Permissions() {
		seen[p.Feature] = true
		if !slices.Contains(verbs, p.Verb) {
			t.Errorf("%s: verb %q is none of %v", p, p.Verb, verbs)
		}
		if p.Call == "" || p.Why == "" {
			t.Errorf("%s: says neither which call needs it nor why", p)
		}
		if (p.Scope == ScopeNonResource) != (p.URL != "") || (p.Scope == ScopeNonResource) == (p.Resource != "") {
			t.Errorf("%s: a non-resource permission has a URL and no resource, and only it", p)
		}
		if p.Default && p.Scope != ScopeNonResource {
			t.Errorf("%s: only GET /version is granted to everyone by default", p)
		}
		if len(p.TargetKinds) > 0 && p.Feature != FeatureTunnel && p.Feature != FeatureMeshConfig {
			t.Errorf("%s: target kinds on a %s permission", p, p.Feature)
		}
		if p.Worker && (p.Feature != FeatureWorkers || p.Scope != ScopeNamespace) {
			t.Errorf("%s: a worker's permission is a namespaced one of the workers feature", p)
		}
	}
	for _, f := range AllFeatures() {
		if !seen[f] {
			t.Errorf("feature %s has no permission", f)
		}
	}
}

func TestPermissionsForTargetKind(t *testing.T) {
	has := func(ps []Permission, s string) bool {
		return slices.ContainsFunc(ps, func(p Permission) bool { return p.String() == s })
	}
	for _, tc := range []struct {
		kind      string
		want, not []string
	}{
		{portforward.KindPod, []string{"get pods", "create pods/portforward", "get pods/portforward", "watch pods"}, []string{"get services", "get deployments.apps", "list pods"}},
		{portforward.KindService, []string{"get services", "list pods", "create pods/portforward"}, []string{"get deployments.apps"}},
		{portforward.KindDeployment, []string{"get deployments.apps", "list pods", "create pods/portforward"}, []string{"get services"}},
		{"", []string{"get services", "get deployments.apps", "list pods"}, nil},
	} {
		ps := PermissionsFor(FeatureTunnel, tc.kind)
		for _, w := range tc.want {
			if !has(ps, w) {
				t.Errorf("tunnel to a %q target: no %s in %v", tc.kind, w, ps)
			}
		}
		for _, n := range tc.not {
			if has(ps, n) {
				t.Errorf("tunnel to a %q target: %s is not needed", tc.kind, n)
			}
		}
	}
}

// decode reads a manifest back with the same YAML library kubectl's
// decoders use, by kind; roles are mesh-verify's by namespace, the
// workers' Roles (named kube.DefaultWorkerServiceAccount) are left out.
func decode(t *testing.T, objs []runtime.Object) (roles map[string]*rbacv1.Role, cluster []*rbacv1.ClusterRole, text string) {
	roles, _, cluster, text = decodeAll(t, objs)
	return roles, cluster, text
}

func decodeAll(t *testing.T, objs []runtime.Object) (roles, workerRoles map[string]*rbacv1.Role, cluster []*rbacv1.ClusterRole, text string) {
	t.Helper()
	var b strings.Builder
	if err := WriteManifest(&b, "header", objs); err != nil {
		t.Fatal(err)
	}
	text = b.String()
	roles = map[string]*rbacv1.Role{}
	workerRoles = map[string]*rbacv1.Role{}
	for _, doc := range strings.Split(text, "---\n")[1:] {
		var tm struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			if r.Name == kube.DefaultWorkerServiceAccount {
				workerRoles[r.Namespace] = &r
			} else {
				roles[r.Namespace] = &r
			}
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			cluster = append(cluster, &r)
		}
	}
	return roles, workerRoles, cluster, text
}

func TestManifestGrantsExactlyTheNeeds(t *testing.T) {
	needs := []Need{
		{Cluster: "c1", Namespace: "front", Feature: FeatureTunnel, TargetKind: portforward.KindService},
		{Cluster: "c1", Namespace: "apps", Feature: FeatureNamespaceCheck},
		{Cluster: "c1", Namespace: "apps", Feature: FeatureInventory},
		{Cluster: "c2", Namespace: "apps", Feature: FeatureLogs},
		{Cluster: "c2", Namespace: "apps", Feature: FeatureMetricsProxy},
		{Cluster: "c2", Feature: FeatureConnect},
	}
	roles, cluster, text := decode(t, Manifest(ManifestOptions{Needs: needs, Namespace: "ops"}))
	if !strings.HasPrefix(text, "# header\n---\napiVersion: v1\nkind: ServiceAccount\n") || strings.Contains(text, "creationTimestamp") {
		t.Errorf("manifest does not open with the header and the ServiceAccount, or carries creationTimestamp:\n%s", text)
	}
	if len(roles) != 2 || roles["front"] == nil || roles["apps"] == nil {
		t.Fatalf("want one Role in front and one in apps, got %v", roles)
	}
	if len(cluster) != 1 || cluster[0].Name != "ops:mesh-verify" || len(cluster[0].Rules) != 1 || !Grants(cluster[0].Rules, "get", "", "nodes", "n1") {
		t.Errorf("want one ClusterRole ops:mesh-verify granting get nodes only, got %+v", cluster)
	}
	for _, n := range needs {
		for _, p := range PermissionsFor(n.Feature, n.TargetKind) {
			switch p.Scope {
			case ScopeNamespace, ScopeOwnNamespace:
				if !Grants(roles[n.Namespace].Rules, p.Verb, p.Group, p.RBACResource(), n.Namespace) {
					t.Errorf("Role in %s does not grant %s (%s)", n.Namespace, p, n.Feature)
				}
			}
		}
	}
	// Minimal: the target's namespace gets no logs, the observed one no
	// port-forward or Service, and the namespace check names its namespace.
	for _, tc := range []struct{ ns, verb, resource, name string }{
		{"front", "get", "pods/log", ""}, {"front", "get", "pods/proxy", "x"}, {"apps", "create", "pods/portforward", ""},
		{"apps", "get", "services", ""}, {"apps", "get", "namespaces", "other"}, {"front", "get", "namespaces", "front"},
	} {
		if Grants(roles[tc.ns].Rules, tc.verb, "", tc.resource, tc.name) {
			t.Errorf("Role in %s grants %s %s %s, which no need there calls for", tc.ns, tc.verb, tc.resource, tc.name)
		}
	}
	if Grants(roles["front"].Rules, "get", "apps", "deployments", "d") {
		t.Errorf("Role in front grants get deployments for a svc/ target")
	}
	if !Grants(roles["apps"].Rules, "get", "", "namespaces", "apps") {
		t.Errorf("Role in apps does not grant get on its own namespace")
	}
}

func TestManifestClusterWideAndGeneric(t *testing.T) {
	roles, cluster, _ := decode(t, Manifest(ManifestOptions{ClusterWide: true, ServiceAccount: "gate", Namespace: "ci"}))
	if len(roles) != 0 || len(cluster) != 1 || cluster[0].Name != "ci:gate" {
		t.Fatalf("cluster-wide: want one ClusterRole ci:gate and no Role, got %v %v", roles, cluster)
	}
	roles, _, _ = decode(t, Manifest(ManifestOptions{Namespace: "ci"}))
	for _, p := range Permissions() {
		rules := cluster[0].Rules
		if p.Scope == ScopeNonResource || p.Worker || p.Feature == FeatureMeshConfig {
			continue // mesh-config: only for a scenario that reads the mesh
		}
		if !Grants(rules, p.Verb, p.Group, p.RBACResource(), "any") {
			t.Errorf("cluster-wide manifest lacks %s", p)
		}
		if p.Scope != ScopeCluster && !Grants(roles["ci"].Rules, p.Verb, p.Group, p.RBACResource(), "ci") {
			t.Errorf("generic manifest's Role in ci lacks %s", p)
		}
	}
}

func TestManifestWorkers(t *testing.T) {
	if WorkerNeeds("c1", "load", 0) != nil {
		t.Errorf("a run without workers needs no workers' RBAC")
	}
	needs := append([]Need{{Cluster: "c1", Namespace: "apps", Feature: FeatureInventory}}, WorkerNeeds("c1", "load", 3)...)
	objs := Manifest(ManifestOptions{Needs: needs, Namespace: "ops"})
	roles, workers, _, text := decodeAll(t, objs)
	if roles["load"] == nil || workers["load"] == nil || workers["apps"] != nil || len(workers) != 1 {
		t.Fatalf("want mesh-verify's Role and the workers' Role in load, none for apps: roles %v, workers' %v", roles, workers)
	}
	coordinator := []string{"create jobs.batch", "patch jobs.batch", "list jobs.batch", "delete jobs.batch",
		"create configmaps", "patch configmaps", "list configmaps", "delete configmaps", "create secrets",
		"get serviceaccounts", "list pods", "watch pods", "get pods/log"}
	allow := func(rules []rbacv1.PolicyRule, s string) bool {
		verb, res, _ := strings.Cut(s, " ")
		res, group, _ := strings.Cut(res, ".")
		return Grants(rules, verb, group, res, "mv-x")
	}
	for _, s := range coordinator {
		if !allow(roles["load"].Rules, s) {
			t.Errorf("mesh-verify's Role in load does not grant %s", s)
		}
		if allow(roles["apps"].Rules, s) && s != "list pods" && s != "watch pods" { // the inventory's
			t.Errorf("mesh-verify's Role in apps grants %s, which only the workers' namespace needs", s)
		}
	}
	for _, s := range []string{"delete pods", "create pods", "update jobs.batch", "delete jobs/status.batch", "create serviceaccounts",
		"watch jobs.batch", "get jobs.batch", "get configmaps", "watch configmaps", "get secrets", "list secrets", "watch secrets", "delete secrets"} {
		if allow(roles["load"].Rules, s) {
			t.Errorf("mesh-verify's Role in load grants %s, which nothing calls", s)
		}
	}
	for _, s := range []string{"get configmaps", "watch configmaps", "get secrets"} {
		if !allow(workers["load"].Rules, s) {
			t.Errorf("the workers' Role does not grant %s", s)
		}
	}
	for _, s := range []string{"list configmaps", "create configmaps", "patch configmaps", "delete configmaps", "list pods", "list secrets", "watch secrets", "create secrets", "create jobs.batch"} {
		if allow(workers["load"].Rules, s) {
			t.Errorf("the workers' Role grants %s, which a worker never calls", s)
		}
	}
	for _, want := range []string{
		"kind: ServiceAccount\nmetadata:\n  labels:\n    app.kubernetes.io/name: mesh-verify\n  name: mesh-verify-worker\n  namespace: load\n",
		"kind: RoleBinding\nmetadata:\n  labels:\n    app.kubernetes.io/name: mesh-verify\n  name: mesh-verify-worker\n  namespace: load\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: mesh-verify-worker\nsubjects:\n- kind: ServiceAccount\n  name: mesh-verify-worker\n  namespace: load\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("manifest lacks\n%s\nin:\n%s", want, text)
		}
	}

	// Cluster-wide: mesh-verify's grants go to its ClusterRole, the
	// workers' stay a Role in their namespace, named after
	// WorkerServiceAccount (decodeAll counts it among roles).
	roles, _, cluster, _ := decodeAll(t, Manifest(ManifestOptions{Needs: needs, ClusterWide: true, WorkerServiceAccount: "w"}))
	if len(cluster) != 1 || !allow(cluster[0].Rules, "create jobs.batch") || allow(cluster[0].Rules, "delete pods") {
		t.Errorf("cluster-wide: want one ClusterRole granting create jobs, not delete pods, got %+v", cluster)
	}
	if len(roles) != 1 || roles["load"] == nil || roles["load"].Name != "w" || !allow(roles["load"].Rules, "watch configmaps") || allow(roles["load"].Rules, "create jobs.batch") {
		t.Errorf("cluster-wide: want only the workers' Role w in load, got %+v", roles)
	}

	// The generic manifest has the workers' objects in its namespace.
	_, workers, _, _ = decodeAll(t, Manifest(ManifestOptions{Namespace: "ci"}))
	if workers["ci"] == nil {
		t.Errorf("the generic manifest has no workers' Role in ci")
	}
}
