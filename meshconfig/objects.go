package meshconfig

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Objects are what was read, per scenario cluster: the mesh objects and
// the Services and Pods they lead to. Resolution is a pure function of
// them, so tests build them by hand.
type Objects map[string][]*unstructured.Unstructured

// find is the object of kind, namespace and name in cluster, or nil.
func (o Objects) find(cluster, kind, ns, name string) *unstructured.Unstructured {
	for _, u := range o[cluster] {
		if u.GetKind() == kind && u.GetNamespace() == ns && u.GetName() == name {
			return u
		}
	}
	return nil
}

// all lists the objects of kind in cluster and namespace ("" for every
// namespace), by name so that results do not depend on read order.
func (o Objects) all(cluster, kind, ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range o[cluster] {
		if u.GetKind() == kind && (ns == "" || u.GetNamespace() == ns) {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return out
}

// ObjectError is a problem with one field of one object, or with the
// object as a whole (Path empty).
type ObjectError struct {
	Cluster, Kind, Namespace, Name string
	// Path is the field, like spec.http[0].route[1].weight.
	Path string
	Msg  string
}

func (e *ObjectError) Error() string {
	obj := e.Kind + " " + e.Name
	if e.Namespace != "" {
		obj = e.Kind + " " + e.Namespace + "/" + e.Name
	}
	if e.Path == "" {
		return fmt.Sprintf("%s in cluster %s: %s", obj, e.Cluster, e.Msg)
	}
	return fmt.Sprintf("%s in cluster %s, field %s: %s", obj, e.Cluster, e.Path, e.Msg)
}

// obj is one object being read, with the cluster it came from and the
// fields the resolution used (the provenance's field paths).
type obj struct {
	u       *unstructured.Unstructured
	cluster string
	used    []string
}

func newObj(u *unstructured.Unstructured, cluster string) *obj { return &obj{u: u, cluster: cluster} }

// use records a field path the result depends on.
func (o *obj) use(path string) {
	if !slices.Contains(o.used, path) {
		o.used = append(o.used, path)
	}
}

// source is the object's provenance.
func (o *obj) source() Source {
	return Source{
		Cluster: o.cluster, APIVersion: o.u.GetAPIVersion(), Kind: o.u.GetKind(),
		Namespace: o.u.GetNamespace(), Name: o.u.GetName(), ResourceVersion: o.u.GetResourceVersion(),
		Fields: slices.Clone(o.used),
	}
}

func (o *obj) errf(path, format string, a ...any) error {
	return &ObjectError{Cluster: o.cluster, Kind: o.u.GetKind(), Namespace: o.u.GetNamespace(), Name: o.u.GetName(), Path: path, Msg: fmt.Sprintf(format, a...)}
}

// root is the object's content as a node.
func (o *obj) root() node { return node{o: o, v: o.u.Object} }

// node is a value inside an object with its field path: every accessor
// reports a wrong type as an error naming the path; a missing field is
// the zero value.
type node struct {
	o    *obj
	path string
	v    any
}

func (n node) join(key string) string {
	if n.path == "" {
		return key
	}
	return n.path + "." + key
}

// get is the field key of an object node (missing when n is not one; the
// typed accessors report that).
func (n node) get(key string) node {
	m, _ := n.v.(map[string]any)
	return node{o: n.o, path: n.join(key), v: m[key]}
}

func (n node) missing() bool { return n.v == nil }

func (n node) errf(format string, a ...any) error { return n.o.errf(n.path, format, a...) }

func (n node) object() (map[string]any, error) {
	if n.v == nil {
		return nil, nil
	}
	m, ok := n.v.(map[string]any)
	if !ok {
		return nil, n.errf("want an object, have %T", n.v)
	}
	return m, nil
}

func (n node) list() ([]node, error) {
	if n.v == nil {
		return nil, nil
	}
	l, ok := n.v.([]any)
	if !ok {
		return nil, n.errf("want a list, have %T", n.v)
	}
	out := make([]node, len(l))
	for i, x := range l {
		out[i] = node{o: n.o, path: fmt.Sprintf("%s[%d]", n.path, i), v: x}
	}
	return out, nil
}

func (n node) str() (string, error) {
	if n.v == nil {
		return "", nil
	}
	s, ok := n.v.(string)
	if !ok {
		return "", n.errf("want a string, have %T", n.v)
	}
	return s, nil
}

// num reads a number as JSON decodes it; set says whether it was there.
func (n node) num() (v float64, set bool, err error) {
	switch x := n.v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return float64(x), true, nil
	case int:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	return 0, false, n.errf("want a number, have %T", n.v)
}

func (n node) strMap() (map[string]string, error) {
	m, err := n.object()
	if err != nil || m == nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, n.get(k).errf("want a string, have %T", x)
		}
		out[k] = s
	}
	return out, nil
}

// keys lists an object node's keys, sorted.
func (n node) keys() []string {
	m, _ := n.v.(map[string]any)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
