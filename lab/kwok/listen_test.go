package kwok

import (
	"fmt"
	"strings"
	"testing"
)

// The head of a kwok.yaml that kwokctl v0.8.0 wrote for a lab cluster
// (args and most fields cut; the structure, field names and order as
// written), then the first of the stages the lab's configuration adds.
const kwokYAML = `apiVersion: config.kwok.x-k8s.io/v1alpha1
components:
- args:
  - --listen-peer-urls=http://127.0.0.1:32748
  binary: /root/.cache/mesh-verify/lab/bin-506af6a95339/etcd
  name: etcd
  ports:
  - name: peer-http
    port: 32748
    protocol: TCP
  - name: http
    port: 32747
    protocol: TCP
  version: 3.6.8
- args:
  - --secure-port=32746
  name: kube-apiserver
  ports:
  - name: https
    port: 32746
    protocol: TCP
- args:
  - --secure-port=32744
  name: kube-controller-manager
  ports:
  - name: https
    port: 32744
    protocol: TCP
- name: kube-scheduler
  ports:
  - name: https
    port: 32743
    protocol: TCP
- name: kwok-controller
  ports:
  - name: https
    port: 32745
    protocol: TCP
kind: KwokctlConfiguration
options:
  etcdPeerPort: 32748
  kubeApiserverPort: 32746
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {apiGroup: v1, kind: Node}
`

func TestComponentPorts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       string // the ports as "component:port ..."
		err        string // a part of the error
	}{
		{"kwokctl's file", kwokYAML,
			"etcd:32748 etcd:32747 kube-apiserver:32746 kube-controller-manager:32744 kube-scheduler:32743 kwok-controller:32745", ""},
		{"no component", "kind: KwokctlConfiguration\n", "", ""},
		{"a component without ports", "kind: KwokctlConfiguration\ncomponents: [{name: dashboard}]\n", "", ""},
		{"empty", "", "", "empty kwokctl configuration"},
		{"another kind first", "kind: Stage\n---\n" + kwokYAML, "", `kind "Stage"`},
		{"port 0", "kind: KwokctlConfiguration\ncomponents: [{name: etcd, ports: [{port: 0}]}]\n", "", "components[0] (etcd) ports[0].port 0: want 1-65535"},
		{"port too large", "kind: KwokctlConfiguration\ncomponents: [{name: a}, {name: etcd, ports: [{port: 1}, {port: 65536}]}]\n", "", "components[1] (etcd) ports[1].port 65536"},
		{"not a number", "kind: KwokctlConfiguration\ncomponents: [{name: etcd, ports: [{port: http}]}]\n", "", "line 2"},
		{"not YAML", "kind: [\n", "", "kwokctl configuration: yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ports, err := componentPorts([]byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("componentPorts: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ports {
				got = append(got, fmt.Sprintf("%s:%d", p.Component, p.Port))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("componentPorts = %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

func FuzzComponentPorts(f *testing.F) {
	f.Add([]byte(kwokYAML))
	f.Add([]byte("kind: KwokctlConfiguration\ncomponents: [{name: etcd, ports: [{port: 65535}]}]\n"))
	f.Add([]byte("kind: KwokctlConfiguration\ncomponents: [{ports: [{port: -1}]}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ports, err := componentPorts(b)
		if err != nil && ports != nil {
			t.Fatalf("ports %v beside error %v", ports, err)
		}
		for _, p := range ports {
			if p.Port < 1 || p.Port > 65535 {
				t.Fatalf("port %d out of range accepted", p.Port)
			}
		}
	})
}
