package meshroute

import (
	"strings"
	"testing"
)

// FuzzSkupperService: any skupper-services entry either parses into an
// object or fails with an error; deriving a route from it never panics,
// and an error names the ConfigMap and the entry's key.
func FuzzSkupperService(f *testing.F) {
	f.Add(`{"address":"app","protocol":"tcp","ports":[8080],"targets":[{"name":"app","selector":"app=app"}]}`)
	f.Add(`{"address":"app","ports":[1e9],"targets":[{"service":"app"}]}`)
	f.Add(`{"address":"app","targets":[{"selector":"a in (b"}]}`)
	f.Add(`null`)
	e := Entry{Name: "e", Mesh: MeshSkupper, Cluster: "c1", Namespace: "ns", To: "app", ServicePort: 8080, Clusters: []string{"c1", "c2"},
		PodLabels: []map[string]string{{"app": "app"}}}
	f.Fuzz(func(t *testing.T, def string) {
		ms, err := Load("f.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skupper-services, namespace: ns}\n"))
		if err != nil {
			t.Fatal(err)
		}
		cm := ms[0].Object
		cm.Object["data"] = map[string]any{"app": def}
		_, err = Derive(e, Objects{"c2": {cm}})
		if err != nil && !strings.Contains(err.Error(), "ConfigMap ns/skupper-services in cluster c2: data.app") {
			t.Fatalf("error does not name the ConfigMap and key: %v", err)
		}
	})
}
