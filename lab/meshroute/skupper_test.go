package meshroute

import (
	"strings"
	"testing"
)

// TestSkupperServiceLimit: an entry of skupper-services beyond
// MaxSkupperServiceBytes is refused, one at the limit is read.
func TestSkupperServiceLimit(t *testing.T) {
	t.Parallel()
	def := `{"address":"app","ports":[8080],"targets":[{"selector":"app=app"}],"labels":{"pad":"`
	at := def + strings.Repeat("x", MaxSkupperServiceBytes-len(def)-3) + `"}}`
	if len(at) != MaxSkupperServiceBytes {
		t.Fatalf("test entry is %d bytes, want %d", len(at), MaxSkupperServiceBytes)
	}
	if _, err := parseSkupperService(at); err != nil {
		t.Errorf("an entry of %d bytes: %v, want it read", len(at), err)
	}
	over := strings.Replace(at, `"pad":"`, `"pad":"y`, 1)
	if _, err := parseSkupperService(over); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an entry of %d bytes: %v, want it refused by its size", len(over), err)
	}
}

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
