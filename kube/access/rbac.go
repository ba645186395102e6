package access

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mesh-verify/mesh-verify/kube"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Need is one feature a run uses in one namespace of one cluster.
type Need struct {
	Cluster   string
	Namespace string
	Feature   Feature
	// TargetKind is the tunnel target's kind (FeatureTunnel only).
	TargetKind string
}

// ManifestOptions say what `mesh-verify rbac` generates.
type ManifestOptions struct {
	// ServiceAccount and Namespace name the ServiceAccount the roles are
	// bound to (default mesh-verify in default).
	ServiceAccount string
	Namespace      string
	// ClusterWide grants everything through one ClusterRole and
	// ClusterRoleBinding instead of a Role per namespace.
	ClusterWide bool
	// Needs are what a scenario uses; none means every feature with every
	// target kind, in Namespace (or in every namespace when ClusterWide).
	Needs []Need
	// WorkerServiceAccount names the ServiceAccount the worker pods of a
	// FeatureWorkers need run as, created with its Role in each such
	// namespace (default kube.DefaultWorkerServiceAccount).
	WorkerServiceAccount string
}

// WorkerNeeds are the needs of a distributed run whose workers (workers
// pods, none when 0) run in namespace of cluster: what a scenario with
// attack.workers > 0 adds to its needs.
func WorkerNeeds(cluster, namespace string, workers int) []Need {
	if workers <= 0 {
		return nil
	}
	return []Need{{Cluster: cluster, Namespace: namespace, Feature: FeatureWorkers}}
}

// Defaults of ManifestOptions.
const (
	DefaultServiceAccount = "mesh-verify"
	DefaultRBACNamespace  = "default"
)

// Manifest builds the ServiceAccount, Roles (or ClusterRole) and bindings
// that grant exactly the permissions the needs call for: one Role per
// namespace, a ClusterRole only for cluster-scoped resources (nodes).
// Permissions every authenticated user already has (GET /version) are
// left out. A namespace workers run in (FeatureWorkers) also gets the
// workers' ServiceAccount, a Role with what the worker calls (read its
// ConfigMap) and its binding, whether ClusterWide or not: the worker's
// pods only ever run in that namespace.
func Manifest(o ManifestOptions) []runtime.Object {
	sa := cmp.Or(o.ServiceAccount, DefaultServiceAccount)
	saNS := cmp.Or(o.Namespace, DefaultRBACNamespace)
	needs := o.Needs
	if len(needs) == 0 {
		for _, f := range Features() {
			needs = append(needs, Need{Namespace: saNS, Feature: f})
		}
	}
	// grants per namespace ("" for cluster-scoped), deduplicated.
	type grant struct{ group, resource, name, verb string }
	byNS := map[string]map[grant]bool{}
	workerNS := map[string]map[grant]bool{}
	add := func(ns string, g grant) {
		if byNS[ns] == nil {
			byNS[ns] = map[grant]bool{}
		}
		byNS[ns][g] = true
	}
	for _, n := range needs {
		for _, p := range PermissionsFor(n.Feature, n.TargetKind) {
			g := grant{group: p.Group, resource: p.RBACResource(), name: p.ResourceName, verb: p.Verb}
			if p.Worker {
				if workerNS[n.Namespace] == nil {
					workerNS[n.Namespace] = map[grant]bool{}
				}
				workerNS[n.Namespace][g] = true
				continue
			}
			switch p.Scope {
			case ScopeNonResource:
				continue // Default: granted to every authenticated user
			case ScopeCluster:
				add("", g)
			case ScopeOwnNamespace:
				if !o.ClusterWide {
					g.name = n.Namespace
				}
				add(n.Namespace, g)
			default:
				add(n.Namespace, g)
			}
		}
	}
	rulesOf := func(set map[grant]bool) []rbacv1.PolicyRule {
		// One rule per group, resource and name, its verbs sorted.
		type key struct{ group, resource, name string }
		verbs := map[key][]string{}
		for g := range set {
			k := key{g.group, g.resource, g.name}
			if !slices.Contains(verbs[k], g.verb) {
				verbs[k] = append(verbs[k], g.verb)
			}
		}
		keys := make([]key, 0, len(verbs))
		for k := range verbs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b key) int {
			return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.resource, b.resource), cmp.Compare(a.name, b.name))
		})
		rules := make([]rbacv1.PolicyRule, 0, len(keys))
		for _, k := range keys {
			vs := verbs[k]
			slices.Sort(vs)
			r := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: vs}
			if k.name != "" {
				r.ResourceNames = []string{k.name}
			}
			rules = append(rules, r)
		}
		return rules
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNS}}
	objs := []runtime.Object{&corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(sa, saNS),
	}}
	clusterName := saNS + ":" + sa // one per ServiceAccount: ClusterRole names are cluster-wide
	clusterRole := func(set map[grant]bool) {
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: meta(clusterName, ""), Rules: rulesOf(set)},
			&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: meta(clusterName, ""),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterName}, Subjects: subject})
	}
	if o.ClusterWide {
		all := map[grant]bool{}
		for _, set := range byNS {
			for g := range set {
				all[g] = true
			}
		}
		clusterRole(all)
		return append(objs, workerObjects(o, workerNS, rulesOf)...)
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		if ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		objs = append(objs,
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta(sa, ns), Rules: rulesOf(byNS[ns])},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta(sa, ns),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}, Subjects: subject})
	}
	if set := byNS[""]; len(set) > 0 {
		clusterRole(set)
	}
	return append(objs, workerObjects(o, workerNS, rulesOf)...)
}

// workerObjects are the workers' ServiceAccount, Role and RoleBinding in
// every namespace of grants, in namespace order.
func workerObjects[G comparable](o ManifestOptions, grants map[string]map[G]bool, rulesOf func(map[G]bool) []rbacv1.PolicyRule) []runtime.Object {
	name := cmp.Or(o.WorkerServiceAccount, kube.DefaultWorkerServiceAccount)
	namespaces := make([]string, 0, len(grants))
	for ns := range grants {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	var objs []runtime.Object
	for _, ns := range namespaces {
		objs = append(objs,
			&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(name, ns)},
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta(name, ns), Rules: rulesOf(grants[ns])},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta(name, ns),
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}})
	}
	return objs
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

func meta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "mesh-verify"}}
}

// WriteManifest writes the objects as YAML documents separated by "---",
// after a header comment (each line prefixed with "# ").
func WriteManifest(w io.Writer, header string, objs []runtime.Object) error {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimSpace(header), "\n") {
		if l != "" {
			b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	items, err := manifestItems(objs)
	if err != nil {
		return err
	}
	for i, u := range items {
		out, err := yaml.Marshal(u)
		if err != nil {
			return fmt.Errorf("encode %T: %w", objs[i], err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// WriteManifestJSON writes the objects as one JSON document, a v1 List
// (kubectl apply -f takes it); JSON has no comments, so no header.
func WriteManifestJSON(w io.Writer, objs []runtime.Object) error {
	items, err := manifestItems(objs)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// manifestItems are the objects as maps, so that the zero
// creationTimestamp (null) and empty status are left out, as kubectl
// create --dry-run writes them.
func manifestItems(objs []runtime.Object) ([]map[string]any, error) {
	items := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", o, err)
		}
		if m, ok := u["metadata"].(map[string]any); ok {
			delete(m, "creationTimestamp")
		}
		items = append(items, u)
	}
	return items, nil
}

// Grants reports whether one of rules allows verb on group/resource (an
// RBAC resource, "pods/log") for the object name, by RBAC's matching:
// "*" matches any verb, group or resource; resourceNames, when given,
// must list the name.
func Grants(rules []rbacv1.PolicyRule, verb, group, resource, name string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if has(r.Verbs, verb) && has(r.APIGroups, group) && has(r.Resources, resource) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}
