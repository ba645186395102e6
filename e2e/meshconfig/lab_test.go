package meshconfig_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/lab/crds"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/meshconfig"
)

// registerCRDs makes the cluster serve the meshes' upstream CRDs
// (lab/crds), as installing the mesh does.
func registerCRDs(t *testing.T, lab *labtest.Lab, cluster string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range crds.Files() {
		b, err := crds.YAML(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lab.Lab.Kubectl(ctx, cluster, b, "apply", "--server-side", "--field-manager=meshconfig-test", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"wait", "--for=condition=Established", "--timeout=60s"}
	for _, n := range crds.Names() {
		args = append(args, "crd/"+n)
	}
	lab.Kubectl(t, cluster, args...)
}

const bookinfo = `apiVersion: apps/v1
kind: Deployment
metadata: {name: reviews-v1, namespace: demo}
spec:
  replicas: 1
  selector: {matchLabels: {app: reviews, version: v1}}
  template:
    metadata: {labels: {app: reviews, version: v1}}
    spec: {containers: [{name: app, image: reviews:v1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: reviews-v2, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: reviews, version: v2}}
  template:
    metadata: {labels: {app: reviews, version: v2}}
    spec: {containers: [{name: app, image: reviews:v2}]}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: demo}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: demo}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: demo}
spec:
  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 90}
    - {destination: {host: reviews, subset: v2}, weight: 10}
    mirror: {host: reviews, subset: v2}
    mirrorPercentage: {value: 5}
---
apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: canary, namespace: demo, labels: {kuma.io/mesh: default}}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, name: reviews}
    rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      default:
        backendRefs:
        - {kind: MeshService, labels: {kuma.io/display-name: reviews, kuma.io/zone: c1}, port: 9080, weight: 3}
        - {kind: MeshService, labels: {kuma.io/display-name: reviews, kuma.io/zone: c2}, port: 9080, weight: 1}
`

// TestLabResolve applies real objects to a real kube-apiserver serving
// the meshes' upstream CRDs, reads them with the dynamic client as the
// user, resolves the expected split, patches a weight and resolves
// again: the shares and the resourceVersion follow the object. It also
// checks the errors for a missing object and a user without rights, and
// that the rights meshconfig.Permissions lists are enough.
func TestLabResolve(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	registerCRDs(t, lab, "c1")
	lab.Apply(t, "c1", labtest.Node("node-1"))
	lab.Apply(t, "c1", "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n")
	admin := lab.Connect(t, "c1")
	ctx := context.Background()
	e2etest.Poll(t, 30*time.Second, "default ServiceAccount in demo", func() error {
		_, err := admin.Client.CoreV1().ServiceAccounts("demo").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	lab.Apply(t, "c1", bookinfo)
	readers := readersOf(t, admin)

	q := meshconfig.Query{Ref: meshconfig.Ref{Kind: meshconfig.KindVirtualService, Namespace: "demo", Name: "reviews"}, By: meshconfig.ByVersion, Clusters: []string{"c1"}}
	var e meshconfig.Expected
	// The pods become ready a few seconds after the Deployments: until
	// then subset v2 (or v1) matches no ready pod, which Resolve refuses.
	e2etest.Poll(t, 60*time.Second, "an expected split from VirtualService demo/reviews", func() error {
		objs, err := meshconfig.Fetch(ctx, q, readers)
		if err != nil {
			return err
		}
		e, err = meshconfig.Resolve(q, objs)
		return err
	})
	checkShares(t, e, map[string]float64{"v1": 0.9, "v2": 0.1})
	if len(e.Mirrors) != 1 || e.Mirrors[0] != (meshconfig.Mirror{Bucket: "v2", Percent: 5, Field: "spec.http[0].mirrorPercentage.value"}) {
		t.Errorf("mirrors %+v, want 5%% to v2", e.Mirrors)
	}
	rv1 := sourceRV(t, e, meshconfig.KindVirtualService)

	lab.Kubectl(t, "c1", "-n", "demo", "patch", "virtualservice", "reviews", "--type=json",
		`-p=[{"op":"replace","path":"/spec/http/0/route/0/weight","value":1},{"op":"replace","path":"/spec/http/0/route/1/weight","value":3}]`)
	objs, err := meshconfig.Fetch(ctx, q, readers)
	if err != nil {
		t.Fatal(err)
	}
	if e, err = meshconfig.Resolve(q, objs); err != nil {
		t.Fatal(err)
	}
	checkShares(t, e, map[string]float64{"v1": 0.25, "v2": 0.75})
	if e.Weights["v1"] != 1 || e.Weights["v2"] != 3 {
		t.Errorf("weights %v, want the patched 1 and 3", e.Weights)
	}
	if rv2 := sourceRV(t, e, meshconfig.KindVirtualService); rv2 == rv1 {
		t.Errorf("resourceVersion %s did not change with the patch", rv2)
	}

	t.Run("kuma MeshHTTPRoute", func(t *testing.T) {
		q := meshconfig.Query{Ref: meshconfig.Ref{Kind: meshconfig.KindMeshHTTPRoute, Namespace: "demo", Name: "canary"}, By: meshconfig.ByCluster, Clusters: []string{"c1"}}
		objs, err := meshconfig.Fetch(ctx, q, readers)
		if err != nil {
			t.Fatal(err)
		}
		e, err := meshconfig.Resolve(q, objs)
		if err != nil {
			t.Fatal(err)
		}
		checkShares(t, e, map[string]float64{"c1": 0.75, "c2": 0.25})
	})

	t.Run("not found", func(t *testing.T) {
		q := q
		q.Ref.Name = "ratings"
		_, err := meshconfig.Fetch(ctx, q, readers)
		var oe *meshconfig.ObjectError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), "VirtualService demo/ratings in cluster c1: not found") {
			t.Fatalf("error %v, want VirtualService demo/ratings not found", err)
		}
	})

	t.Run("forbidden, then the listed permissions suffice", func(t *testing.T) {
		user := serviceAccountReaders(t, admin, "demo", "reader")
		_, err := meshconfig.Fetch(ctx, q, user)
		var ce *kube.ClusterError
		if !errors.As(err, &ce) || ce.Reason != kube.ReasonForbidden || !strings.Contains(err.Error(), "get virtualservices.networking.istio.io in namespace demo") {
			t.Fatalf("error %v, want forbidden to get virtualservices.networking.istio.io in namespace demo", err)
		}
		lab.Apply(t, "c1", roleFor(meshconfig.Permissions(meshconfig.KindVirtualService), "demo", "reader"))
		e2etest.Poll(t, 30*time.Second, "the Role to take effect", func() error {
			objs, err := meshconfig.Fetch(ctx, q, user)
			if err != nil {
				return err
			}
			got, err := meshconfig.Resolve(q, objs)
			if err == nil && got.Shares["v2"] != 0.75 {
				err = fmt.Errorf("shares %v as the reader, want v2 0.75", got.Shares)
			}
			return err
		})
	})

	t.Run("skupper exposure", func(t *testing.T) { skupperExposure(t, lab, admin) })
}

// skupperApp is a Skupper site's app in namespace demo, exposed with
// Skupper 1.x (the skupper-services ConfigMap `skupper expose` writes;
// its other key, another address, must not be decoded) and, for v2, a
// Connector with a routing key the site's Listener does not have.
const skupperApp = `apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: demo}
spec:
  replicas: 1
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec: {containers: [{name: app, image: backend:v1}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: skupper-services, namespace: demo}
data:
  backend: '{"address":"backend","protocol":"tcp","ports":[8080],"targets":[{"name":"backend","selector":"app=backend"}]}'
  other: 'not JSON: another address, never decoded'
---
apiVersion: skupper.io/v2alpha1
kind: Listener
metadata: {name: backend, namespace: demo}
spec: {routingKey: backend, host: backend, port: 8080}
---
apiVersion: skupper.io/v2alpha1
kind: Connector
metadata: {name: backend, namespace: demo}
spec: {routingKey: backend-old, selector: app=backend, port: 8080}
`

// skupperExposure reads a Skupper site's exposure from a real API server
// serving Skupper's CRDs: a user without the ConfigMap grant gets the
// permission error naming it; meshconfig.Permissions (a get of the one
// ConfigMap by resourceNames, Connectors, Listeners) suffices; the
// ConfigMap is a Source; with the v1 entry gone and the Connector's
// routing key unmatched nothing is exposed, which is an error naming the
// missing objects; the Connector patched onto the Listener's key exposes
// the site again.
func skupperExposure(t *testing.T, lab *labtest.Lab, admin *kube.Cluster) {
	ctx := context.Background()
	lab.Apply(t, "c1", skupperApp)
	q := meshconfig.Query{Ref: meshconfig.Ref{Kind: meshconfig.KindSkupper, Namespace: "demo", Name: "backend"}, By: meshconfig.ByCluster, Clusters: []string{"c1"}, Selector: "app=backend"}
	user := serviceAccountReaders(t, admin, "demo", "skupper-reader")
	// Every Skupper permission but the ConfigMap's.
	var perms []access.Permission
	for _, p := range meshconfig.Permissions(meshconfig.KindSkupper) {
		if p.Resource != "configmaps" {
			perms = append(perms, p)
		}
	}
	lab.Apply(t, "c1", roleFor(perms, "demo", "skupper-reader"))
	e2etest.Poll(t, 30*time.Second, "the ConfigMap read refused as a permission error", func() error {
		_, err := meshconfig.Fetch(ctx, q, user)
		var ce *kube.ClusterError
		if !errors.As(err, &ce) || ce.Reason != kube.ReasonForbidden || !strings.Contains(err.Error(), "get configmaps in namespace demo (ConfigMap skupper-services") {
			return fmt.Errorf("error %v, want forbidden to get configmaps in namespace demo", err)
		}
		return nil
	})
	lab.Apply(t, "c1", roleFor(meshconfig.Permissions(meshconfig.KindSkupper), "demo", "skupper-reader"))
	var e meshconfig.Expected
	e2etest.Poll(t, 60*time.Second, "an expected split from the exposed site, as the reader", func() error {
		objs, err := meshconfig.Fetch(ctx, q, user)
		if err != nil {
			return err
		}
		e, err = meshconfig.Resolve(q, objs)
		return err
	})
	checkShares(t, e, map[string]float64{"c1": 1})
	if rv := sourceRV(t, e, "ConfigMap"); rv == "" {
		t.Error("the skupper-services ConfigMap has no resourceVersion")
	}

	lab.Kubectl(t, "c1", "-n", "demo", "delete", "configmap", "skupper-services")
	objs, err := meshconfig.Fetch(ctx, q, user)
	if err != nil {
		t.Fatal(err)
	}
	_, err = meshconfig.Resolve(q, objs)
	if err == nil || !strings.Contains(err.Error(), "exposed in none of the clusters c1") || !strings.Contains(err.Error(), `routing key "backend-old" has no Listener for backend`) {
		t.Fatalf("error %v, want nothing exposed, naming the Connector's unmatched routing key", err)
	}

	lab.Kubectl(t, "c1", "-n", "demo", "patch", "connector", "backend", "--type=merge", `-p={"spec":{"routingKey":"backend"}}`)
	if objs, err = meshconfig.Fetch(ctx, q, user); err != nil {
		t.Fatal(err)
	}
	if e, err = meshconfig.Resolve(q, objs); err != nil {
		t.Fatal(err)
	}
	checkShares(t, e, map[string]float64{"c1": 1})
	sourceRV(t, e, "Connector")
	sourceRV(t, e, "Listener")
}

// serviceAccountReaders creates ServiceAccount ns/name and connects as it
// with a token: a user with no rights until a Role grants some.
func serviceAccountReaders(t *testing.T, admin *kube.Cluster, ns, name string) map[string]*meshconfig.Reader {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	// CreateToken is no call of the product: the full clientset asks.
	tok, err := kubernetes.NewForConfigOrDie(admin.REST).CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return readersOf(t, asToken(t, admin, tok.Status.Token))
}

// roleFor is a Role and RoleBinding granting perms to a ServiceAccount.
func roleFor(perms []access.Permission, ns, sa string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: meshconfig, namespace: %s}\nrules:\n", ns)
	for _, p := range perms {
		names := ""
		if p.ResourceName != "" {
			names = fmt.Sprintf(", resourceNames: [%q]", p.ResourceName)
		}
		fmt.Fprintf(&b, "- {apiGroups: [%q], resources: [%q], verbs: [%q]%s}\n", p.Group, p.RBACResource(), p.Verb, names)
	}
	fmt.Fprintf(&b, `---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: meshconfig, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: meshconfig}
subjects: [{kind: ServiceAccount, name: %[2]s, namespace: %[1]s}]
`, ns, sa)
	return b.String()
}

// asToken connects to admin's API server with a bearer token only (a
// kubeconfig user with the lab's client certificate would be
// authenticated by the certificate whatever the token).
func asToken(t *testing.T, admin *kube.Cluster, token string) *kube.Cluster {
	t.Helper()
	ca := admin.REST.TLSClientConfig.CAData
	if len(ca) == 0 {
		var err error
		if ca, err = os.ReadFile(admin.REST.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: reader, user: {token: %q}}]
contexts: [{name: reader, context: {cluster: c1, user: reader}}]
current-context: reader
`, admin.Server, base64.StdEncoding.EncodeToString(ca), token)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Connect(context.Background(), kube.ClusterRef{Name: "c1", Context: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readersOf(t *testing.T, c *kube.Cluster) map[string]*meshconfig.Reader {
	t.Helper()
	r, err := meshconfig.NewReaders([]*kube.Cluster{c})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkShares(t *testing.T, e meshconfig.Expected, want map[string]float64) {
	t.Helper()
	if len(e.Shares) != len(want) {
		t.Errorf("shares %v, want %v", e.Shares, want)
	}
	for b, w := range want {
		if g := e.Shares[b]; g < w-1e-9 || g > w+1e-9 {
			t.Errorf("share of %s = %v, want %v (%s)", b, g, w, strings.Join(e.Explanation, "; "))
		}
	}
}

func sourceRV(t *testing.T, e meshconfig.Expected, kind string) string {
	t.Helper()
	for _, s := range e.Sources {
		if s.Kind == kind {
			if s.ResourceVersion == "" {
				t.Errorf("%s has no resourceVersion", s)
			}
			return s.ResourceVersion
		}
	}
	t.Fatalf("no %s among the sources %v", kind, e.Sources)
	return ""
}
