package lab

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A namespace's default ServiceAccount is waited for as long as the
// controller-manager runs (a starved one is slow, not gone), and no longer
// than the short bound when it does not: then the cluster is broken and
// created again. A real HTTP server stands for the API server: 404 for the
// ServiceAccount until it "appears".
func TestWaitServiceAccount(t *testing.T) {
	t.Parallel()
	const never = time.Hour
	cases := []struct {
		name        string
		appearAfter time.Duration
		running     bool
		broken      bool   // a *brokenClusterError
		says        string // part of its message
		within      time.Duration
	}{
		{"controller-manager running, slow: waited for", 600 * time.Millisecond, true, false, "", 5 * time.Second},
		{"controller-manager gone: broken after the short bound", 600 * time.Millisecond, false, true, "(kube-controller-manager running: false)", 550 * time.Millisecond},
		{"running but nothing comes: broken after the long bound", never, true, true, "(kube-controller-manager running: true)", 2 * time.Second},
		{"there at once", 0, false, false, "", time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path != "/api/v1/namespaces/ns/serviceaccounts/default" || time.Since(start) < tc.appearAfter {
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,` +
						`"message":"serviceaccounts \"default\" not found","details":{"name":"default","kind":"serviceaccounts"}}`))
					return
				}
				_, _ = w.Write([]byte(`{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"default","namespace":"ns"}}`))
			}))
			defer srv.Close()
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = waitServiceAccount(context.Background(), cs, "c1", "ns", func() bool { return tc.running }, 200*time.Millisecond, 1500*time.Millisecond)
			took := time.Since(start)
			var be *brokenClusterError
			switch {
			case tc.broken && !errors.As(err, &be):
				t.Fatalf("waitServiceAccount = %v, want a broken cluster", err)
			case tc.broken && !strings.Contains(err.Error(), tc.says):
				t.Errorf("error %q does not say %q", err, tc.says)
			case !tc.broken && err != nil:
				t.Fatalf("waitServiceAccount = %v, want the ServiceAccount", err)
			}
			if took > tc.within {
				t.Errorf("took %v, want at most %v", took, tc.within)
			}
		})
	}
}
