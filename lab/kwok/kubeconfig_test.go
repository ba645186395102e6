package kwok_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// twoContexts is a lab kubeconfig with kind-c1 on server and kind-c2.
func twoContexts(server string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	for _, c := range []string{"c1", "c2"} {
		cfg.Clusters["kwok-"+c] = &clientcmdapi.Cluster{Server: server}
		cfg.AuthInfos["kwok-"+c] = &clientcmdapi.AuthInfo{}
		cfg.Contexts["kind-"+c] = &clientcmdapi.Context{Cluster: "kwok-" + c, AuthInfo: "kwok-" + c}
	}
	cfg.CurrentContext = "kind-c2"
	return cfg
}

// lab up applies c1's manifests with kubectl while kwokctl creates c2,
// which rewrites the shared kubeconfig in place (truncate, then write):
// a kubectl reading it then failed with `context "kind-c1" does not
// exist`. The lab's kubectl reads the cluster's own kubeconfig, written
// once when its context was final, so it works even while the shared one
// is empty, as it is here. A real kubectl against a real HTTP server
// answering /version stands for the API server.
func TestKubectlWhileTheSharedKubeconfigIsRewritten(t *testing.T) {
	t.Parallel()
	bin := labtest.Binaries(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"31","gitVersion":"v1.31.0-lab"}`))
	}))
	t.Cleanup(srv.Close)
	l, err := kwok.New(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := kwok.WriteKubeconfig(twoContexts(srv.URL), l.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// c2 never started (no kubeconfig of its own): kubectl fails naming
	// the missing file rather than reading the shared one.
	if _, err := l.Kubectl(ctx, "c2", nil, "get", "--raw", "/version"); err == nil || !strings.Contains(err.Error(), l.ClusterKubeconfig("c2")) {
		t.Fatalf("kubectl against c2 without its own kubeconfig = %v, want an error naming %s", err, l.ClusterKubeconfig("c2"))
	}
	own := l.ClusterKubeconfig("c1")
	if err := os.MkdirAll(filepath.Dir(own), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := kwok.ExtractContext(l.Kubeconfig, "kind-c1", own); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(own)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Contexts) != 1 || cfg.Contexts["kind-c1"] == nil || len(cfg.Clusters) != 1 || cfg.Clusters["kwok-c1"] == nil {
		t.Fatalf("c1's kubeconfig has contexts %v, clusters %v; want kind-c1 on kwok-c1 only", cfg.Contexts, cfg.Clusters)
	}
	// kwokctl creating c2, caught between its truncate and its write.
	if err := os.WriteFile(l.Kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := l.Kubectl(ctx, "c1", nil, "get", "--raw", "/version")
	if err != nil {
		t.Fatalf("kubectl against c1 while the shared kubeconfig is rewritten: %v", err)
	}
	if !strings.Contains(out, "v1.31.0-lab") {
		t.Errorf("kubectl get --raw /version: %q", out)
	}
}

// The lab's own rewrites of the shared kubeconfig (a context renamed, the
// current context set) are atomic: a reader never sees a truncated file.
// With clientcmd.WriteToFile in place of WriteKubeconfig this fails
// within a few hundred reads.
func TestWriteKubeconfigIsAtomic(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := twoContexts("https://127.0.0.1:1")
	if err := kwok.WriteKubeconfig(cfg, path); err != nil {
		t.Fatal(err)
	}
	// A writer switching the current context until the reads are done.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			cfg.CurrentContext = []string{"kind-c1", "kind-c2"}[i%2]
			if err := kwok.WriteKubeconfig(cfg, path); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	stop := func() { cancel(); <-done }
	defer stop()
	for i := 0; i < 2000; i++ {
		got, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if got.Contexts["kind-c1"] == nil {
			t.Fatalf("read %d: no context kind-c1 in %v", i, got.Contexts)
		}
	}
	// Only once the writer has stopped: while it runs, its temporary
	// file of the moment exists, as it should.
	stop()
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".kubeconfig.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
