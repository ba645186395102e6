package topologies

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// Every built-in topology parses, is named after its file, and says which
// seed experiment it reproduces.
func TestBuiltins(t *testing.T) {
	names := Names()
	for _, want := range []string{"skupper-1", "skupper-2", "skupper-3", "skupper-4", "istio-mirror", "cilium-c2", "cilium-both", "kuma-canary"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("built-ins %v lack %s", names, want)
		}
	}
	for _, n := range names {
		top, err := Builtin(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if top.Metadata.Name != n || top.Metadata.Seed == "" {
			t.Errorf("%s: name %q, seed %q", n, top.Metadata.Name, top.Metadata.Seed)
		}
	}
	if _, err := Builtin("../topologies/skupper-1"); err == nil {
		t.Error("a path is not a built-in name")
	}
}

func TestResolve(t *testing.T) {
	if top, src, err := Resolve("skupper-3"); err != nil || top.File != "builtin:skupper-3" || len(src) == 0 {
		t.Fatalf("Resolve(skupper-3) = %v, %d bytes, %v", top, len(src), err)
	}
	src, _ := Source("kuma-canary")
	f := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(f, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if top, _, err := Resolve(f); err != nil || top.File != f {
		t.Fatalf("Resolve(file) = %v, %v", top, err)
	}
	if _, _, err := Resolve("nope"); err == nil || !strings.Contains(err.Error(), "skupper-1") {
		t.Errorf("Resolve(nope) = %v, want the list of built-ins", err)
	}
	if _, _, err := Resolve("missing.yaml"); err == nil || !strings.Contains(err.Error(), "read topology") {
		t.Errorf("Resolve(missing.yaml) = %v", err)
	}
}

// A topology directory: the built-in's manifests load with it, a copy on
// disk resolves the same, and a manifest the mesh would refuse fails the
// load with the object and the field named, as kubectl or istioctl would.
func TestTopologyDirectories(t *testing.T) {
	top, src, err := Resolve("istio-mirror")
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) == 0 || !strings.Contains(string(src), "mesh: istio") || top.ManifestsDigest() == "" {
		t.Fatalf("istio-mirror: %d manifests, lab.yaml %q", len(top.Manifests), src)
	}
	// What the objects set and the lab does not play is reported by path.
	k, _, err := Resolve("kuma-canary-v3")
	if err != nil {
		t.Fatal(err)
	}
	if notes, err := k.CheckRoutes(); err != nil || !strings.Contains(strings.Join(notes, "\n"), "MeshHTTPRoute kuma-demo/test-server-canary in cluster c1: spec.to[0].rules[0].matches") {
		t.Errorf("kuma-canary-v3 notes %q, %v: want the route's matches named", notes, err)
	}
	ms, err := Manifests("istio-mirror")
	if err != nil {
		t.Fatal(err)
	}
	vs := string(ms["c1/virtualservice.yaml"])
	write := func(t *testing.T, labYAML string, files map[string]string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "topo")
		out := map[string][]byte{}
		for k, v := range ms {
			out[k] = v
		}
		for k, v := range files {
			out[k] = []byte(v)
		}
		if err := WriteDir(dir, []byte(labYAML), out); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if d, _, err := Resolve(write(t, string(src), nil)); err != nil || d.ManifestsDigest() != top.ManifestsDigest() {
		t.Fatalf("a copy on disk: %v (digest %s, want %s)", err, d.ManifestsDigest(), top.ManifestsDigest())
	}
	tests := []struct {
		name  string
		lab   string
		files map[string]string
		err   string
	}{
		{"a route to an undefined subset", string(src), map[string]string{"c1/virtualservice.yaml": strings.Replace(vs, "subset: v1", "subset: v9", 1)},
			`spec.http[0].route[0].destination.subset: subset "v9" is not defined`},
		{"a negative weight", string(src), map[string]string{"c1/virtualservice.yaml": strings.Replace(vs, "weight: 100", "weight: -1", 1)},
			"spec.http[0].route[0].weight: -1"},
		{"an unknown kind", string(src), map[string]string{"c1/extra.yaml": "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s}\n"},
			"c1/extra.yaml:1: Sidecar s: kind Sidecar (apiVersion networking.istio.io/v1) is not a kind the lab serves"},
		{"a directory that is no cluster", string(src), map[string]string{"c9/x.yaml": vs}, "c9: not a cluster of the topology"},
		{"a private policy", strings.Replace(string(src), "    mesh: istio\n", "    mesh: istio\n    policy: {mode: per-pod}\n", 1), nil,
			"topo/lab.yaml:33:5: entries[0].policy: entry istio-proxy: the lab's private policy block is gone; routing comes from the mesh's own objects"},
		{"a Service selecting none of the Deployment's pods", string(src), map[string]string{"c1/callme-service.yaml": strings.Replace(string(ms["c1/callme-service.yaml"]), "  selector:\n    app: callme-service\n", "  selector:\n    name: callme\n", 1)},
			"c1/callme-service.yaml:5: Deployment callme-service-v1: spec.template.metadata.labels map[app:callme-service version:v1]: no Service of the manifests in namespace default selects these pods"},
		{"a pod label the lab sets itself", string(src), map[string]string{"c2/callme-service.yaml": strings.Replace(string(ms["c2/callme-service.yaml"]), "        version: v2\n    spec:", "        version: v2\n        lab.mesh-verify.io/app: x\n    spec:", 1)},
			"c2/callme-service.yaml:5: Deployment default/callme-service-v2: the lab sets lab.mesh-verify.io/app itself"},
		{"an app in lab.yaml and a manifest", strings.Replace(string(src), "entries:", "apps:\n  - {name: callme-service-v1, kind: callme, service: callme-service, replicas: {c1: 1}}\nentries:", 1), nil,
			"app callme-service-v1 is declared in lab.yaml too"},
		{"an unknown mesh", strings.Replace(string(src), "mesh: istio", "mesh: linkerd", 1), nil, `entries[0].mesh: unknown mesh "linkerd"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Resolve(write(t, tc.lab, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Resolve = %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// istio-helloworld's apps and Services are the tutorial's own manifests:
// samples/helloworld's Service and Deployments, applied as the lab
// injects them (the image names the kind, the namespace's
// istio-injection label the sidecar), every other field as written.
func TestWorkloadsFromManifests(t *testing.T) {
	top, _, err := Resolve("istio-helloworld")
	if err != nil {
		t.Fatal(err)
	}
	// The lab's state keeps lab.yaml and the manifests; the daemon
	// rebuilds the same apps from them.
	src, _ := Source("istio-helloworld")
	again, err := topology.ParseFiles(top.File, src, top.ManifestFiles())
	if err != nil || len(again.Apps) != 2 || again.ManifestsDigest() != top.ManifestsDigest() {
		t.Fatalf("ParseFiles: %v, %d apps", err, len(again.Apps))
	}
	for _, tc := range []struct{ app, cluster string }{{"helloworld-v1", "c1"}, {"helloworld-v2", "c2"}} {
		a := top.App(tc.app)
		if a == nil {
			t.Fatalf("no app %s: %+v", tc.app, top.Apps)
		}
		if a.Kind != "helloworld" || a.Sidecar != "istio" || a.Service != "helloworld" || a.Namespace != "sample" ||
			a.Port.Number != 5000 || len(a.Replicas) != 1 || a.Replicas[tc.cluster] != 1 {
			t.Errorf("app %s = %+v", tc.app, a)
		}
		if ds := top.Deployments(tc.cluster); len(ds) != 0 && ds[0].Name == tc.app {
			t.Errorf("%s rendered from lab.yaml too", tc.app)
		}
		ds := top.InjectedDeployments(tc.cluster)
		if len(ds) != 1 {
			t.Fatalf("injected Deployments in %s: %d", tc.cluster, len(ds))
		}
		d := ds[0]
		pt := d.Spec.Template
		c := pt.Spec.Containers[0]
		switch {
		case d.Name != tc.app || d.Namespace != "sample" || len(d.Spec.Selector.MatchLabels) != 2:
			t.Errorf("Deployment %s/%s selector %v: want the tutorial's", d.Namespace, d.Name, d.Spec.Selector.MatchLabels)
		case c.Name != "helloworld" || !strings.HasPrefix(c.Image, "registry.istio.io/release/examples-helloworld-") || c.Resources.Requests.Cpu().String() != "100m":
			t.Errorf("container %+v: want the tutorial's", c)
		case pt.Labels["lab.mesh-verify.io/app"] != tc.app || pt.Labels["lab.mesh-verify.io/managed"] != "true" || pt.Labels["app"] != "helloworld":
			t.Errorf("pod labels %v", pt.Labels)
		case len(pt.Spec.Containers) != 2 || pt.Spec.Containers[1].Name != "istio-proxy":
			t.Errorf("containers %d: want the injected istio-proxy", len(pt.Spec.Containers))
		}
		svcs := top.ServiceObjects(tc.cluster)
		if len(svcs) == 0 || svcs[0].Name != "helloworld" || svcs[0].Labels["service"] != "helloworld" || svcs[0].Spec.Ports[0].TargetPort.IntValue() != 0 {
			t.Errorf("Services of %s: %+v", tc.cluster, svcs)
		}
		for _, s := range top.LabServiceObjects(tc.cluster) {
			if s.Name == "helloworld" {
				t.Errorf("helloworld rendered by the lab in %s: it is applied with its file", tc.cluster)
			}
		}
	}
}

// Cilium's rebel-base is the example's nginx Deployment: the lab reads
// what it answers from the ConfigMap it mounts, its port from the Service.
func TestRebelBaseFromItsConfigMap(t *testing.T) {
	top, _, err := Resolve("cilium-rebel-base")
	if err != nil {
		t.Fatal(err)
	}
	a := top.App("rebel-base")
	if a == nil {
		t.Fatalf("no app rebel-base: %+v", top.Apps)
	}
	want := map[string]string{"c1": "Cluster-1", "c2": "Cluster-2"}
	if a.Kind != "rebel-base" || a.Port.Number != 80 || a.Replicas["c1"] != 2 || a.Replicas["c2"] != 2 || !maps.Equal(a.ClusterNames, want) {
		t.Errorf("rebel-base = %+v, want kind rebel-base on port 80, 2 pods per cluster, cluster names %v", a, want)
	}
	if notes := strings.Join(top.WorkloadNotes, "\n"); strings.Contains(notes, "volume") {
		t.Errorf("notes %q: the ConfigMap volume is played, not a note", notes)
	}
	for _, cl := range []string{"c1", "c2"} {
		ds := top.InjectedDeployments(cl)
		if len(ds) != 1 || ds[0].Spec.Template.Spec.Containers[0].LivenessProbe.PeriodSeconds != 1 {
			t.Errorf("%s: injected Deployments %+v: want the example's, its own probes", cl, ds)
		}
	}
}

// A manifest's workload the lab cannot play is refused by file and object.
func TestWorkloadErrors(t *testing.T) {
	const lab = "apiVersion: lab.mesh-verify.io/v1alpha1\nkind: Topology\nmetadata: {name: w, seed: s}\nclusters: [c1]\n" +
		"entries: [{name: gw, cluster: c1, service: gw, to: web, mesh: istio}]\n"
	const svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n---\n"
	dep := func(image, extra string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n" +
			"  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: " + image + ", ports: [{containerPort: 80}]}]\n" + extra
	}
	// rebel is nginx serving the ConfigMap answer's key message, which
	// holds data key: value (no ConfigMap when key is "").
	rebel := func(key, value string) string {
		d := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n" +
			"  template:\n    metadata: {labels: {app: web}}\n    spec:\n" +
			"      containers: [{name: web, image: nginx:1.15.8, volumeMounts: [{name: html, mountPath: /usr/share/nginx/html/}]}]\n" +
			"      volumes: [{name: html, configMap: {name: answer, items: [{key: message, path: index.html}]}}]\n"
		if key == "" {
			return d
		}
		return d + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: answer}\ndata: {" + key + ": " + value + "}\n"
	}
	for _, tc := range []struct{ name, file, want string }{
		{"an image no app plays", svc + dep("httpd:2.4", ""), "c1/w.yaml:6: Deployment web: spec.template.spec.containers[0].image httpd:2.4: no lab app plays this image"},
		{"nginx without a ConfigMap volume", svc + dep("nginx:1.15.8", ""),
			"c1/w.yaml:6: Deployment web: spec.template.spec.containers[0].volumeMounts: nginx plays rebel-base, which answers the index.html of a ConfigMap mounted at /usr/share/nginx/html"},
		{"a ConfigMap the manifests lack", svc + rebel("", ""),
			"c1/w.yaml:6: Deployment web: spec.template.spec.volumes[0].configMap: ConfigMap default/answer is not in this cluster's manifests"},
		{"a ConfigMap without the item's key", svc + rebel("other", "x"),
			`c1/w.yaml:6: Deployment web: ConfigMap default/answer has no data key "message"`},
		{"an answer without Cluster", svc + rebel("message", `'{"Galaxy": "Alderaan"}'`),
			`c1/w.yaml:6: Deployment web: ConfigMap default/answer data message "{\"Galaxy\": \"Alderaan\"}": rebel-base answers a JSON object with a "Cluster" string`},
		{"an unknown field", svc + dep("piomin/callme-service", "  replicaz: 2\n"), `c1/w.yaml:6: Deployment web: strict decoding error: unknown field "spec.replicaz"`},
		{"no Service selects the pods", dep("piomin/callme-service", ""), "no Service of the manifests in namespace default selects these pods"},
		{"a LoadBalancer", "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {type: LoadBalancer, selector: {app: web}, ports: [{port: 80}]}\n",
			"c1/w.yaml:1: Service web: spec.type LoadBalancer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "topo")
			if err := os.MkdirAll(filepath.Join(dir, "c1"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(lab), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "c1", "w.yaml"), []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := Resolve(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Every built-in Istio gateway entry is routed by a VirtualService bound
// to a Gateway that selects its pods, as a real ingress gateway is: with
// none it would answer every request 404 (meshroute), so a built-in
// topology cannot silently serve through an unbound gateway.
func TestIstioGatewaysAreBound(t *testing.T) {
	t.Parallel()
	n := 0
	for _, name := range Names() {
		top, err := Builtin(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		objs, err := top.MeshObjects()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range top.Entries {
			e := &top.Entries[i]
			if !e.Gateway() || e.Mesh != meshroute.MeshIstio {
				continue
			}
			n++
			r, err := meshroute.Derive(top.RouteEntry(e), objs)
			if err != nil || r.Policy.NoRoute != "" {
				t.Errorf("%s, entry %s: route %v, no route %q", name, e.Name, err, r.Policy.NoRoute)
			}
			if !slices.ContainsFunc(r.From, func(s string) bool { return strings.HasPrefix(s, "Gateway ") }) {
				t.Errorf("%s, entry %s: routed from %v, no Gateway", name, e.Name, r.From)
			}
			for _, d := range top.Deployments(e.Cluster) {
				if d.Name == e.Name && d.Spec.Template.Labels["istio"] != "ingressgateway" {
					t.Errorf("%s, entry %s: pod labels %v, want Istio's default istio=ingressgateway", name, e.Name, d.Spec.Template.Labels)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no built-in topology has an Istio gateway entry (istio-ingress has)")
	}
}

// Every Skupper built-in exposes the sample app in c2 and c3 as the
// tutorial's `skupper expose` (v1's skupper-services ConfigMap, v2's
// Connectors and the router site's Listener) leaves it: the router
// reaches exactly those sites. Without the exposure objects it reaches
// none, whatever the links say.
func TestSkupperBuiltinsAreExposed(t *testing.T) {
	for _, n := range Names() {
		if !strings.HasPrefix(n, "skupper-") {
			continue
		}
		t.Run(n, func(t *testing.T) {
			top, err := Builtin(n)
			if err != nil {
				t.Fatal(err)
			}
			e := top.Entry("skupper-router")
			if e == nil {
				t.Fatal("no entry skupper-router")
			}
			objs, err := top.MeshObjects()
			if err != nil {
				t.Fatal(err)
			}
			r, err := meshroute.Derive(top.RouteEntry(e), objs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Clusters, []string{"c2", "c3"}) || len(r.Ignored) > 0 {
				t.Errorf("reaches %v (ignored %q), want c2 and c3 and nothing ignored", r.Clusters, r.Ignored)
			}
			for c, us := range objs {
				objs[c] = slices.DeleteFunc(slices.Clone(us), func(u *unstructured.Unstructured) bool {
					return u.GetKind() == "ConfigMap" || u.GetKind() == "Connector" || u.GetKind() == "Listener"
				})
			}
			if r, err := meshroute.Derive(top.RouteEntry(e), objs); err != nil || len(r.Clusters) != 0 {
				t.Errorf("without exposure: reaches %v, %v; want no cluster", r.Clusters, err)
			}
		})
	}
}
