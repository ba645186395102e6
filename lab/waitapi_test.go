package lab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
)

// The first kubectl of a new cluster waits on the condition it needs —
// its context in the kubeconfig and its API server answering /version —
// not on a pause: here the context is written 300 ms late and the server
// answers 503 twice first. A real HTTP server stands for the API server.
func TestWaitAPIWaitsForContextAndServer(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		if asked.Add(1) <= 2 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"31","gitVersion":"v1.31.0"}`))
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	empty := clientcmdapi.NewConfig()
	if err := kwok.WriteKubeconfig(empty, path); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["kwok-c1"] = &clientcmdapi.Cluster{Server: srv.URL}
		cfg.AuthInfos["kwok-c1"] = &clientcmdapi.AuthInfo{}
		cfg.Contexts["kind-c1"] = &clientcmdapi.Context{Cluster: "kwok-c1", AuthInfo: "kwok-c1"}
		written <- kwok.WriteKubeconfig(cfg, path)
	})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := waitAPI(ctx, path, "kind-c1"); err != nil {
		t.Fatalf("waitAPI: %v", err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || asked.Load() < 3 {
		t.Errorf("waitAPI returned after %s and %d probes; want it to wait for the context (300 ms) and a 200", took, asked.Load())
	}
	// A cancelled up stops waiting at once.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := waitAPI(cctx, path, "kind-c9"); err == nil {
		t.Error("waitAPI for a context that never appears, cancelled, returned nil")
	}
}
