package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// startKubectlPortForward runs the lab's `kubectl port-forward` to pod and
// returns the local address; the process is stopped by pid at cleanup.
func startKubectlPortForward(b testing.TB, lab *labtest.Lab, cluster, ns, pod string) string {
	b.Helper()
	cmd := exec.Command(filepath.Join(lab.Bin, "kubectl"), "--kubeconfig", lab.Kubeconfig, "--context", lab.Context(cluster),
		"-n", ns, "port-forward", "--address", "127.0.0.1", "pod/"+pod, ":8080")
	cmd.Env = lab.Env()
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	re := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 8080`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, out) // "Handling connection for …" lines
	}()
	select {
	case addr := <-found:
		return addr
	case <-time.After(30 * time.Second):
		b.Fatal("kubectl port-forward printed no Forwarding line")
	}
	return ""
}

// BenchmarkLabTunnelVsKubectl measures requests/s through Tunnel.DialContext
// and through `kubectl port-forward` (same pod, same backend, same client
// settings), with keep-alive and with a new connection per request, and
// logs the ratios (bench/run.sh: side by side, as ratios).
func BenchmarkLabTunnelVsKubectl(b *testing.B) {
	lab := labtest.Clusters(b, "c1")
	d := newDemo(b, lab, "c1", "demo", 1, "version", "v1", true)
	pod := d.waitPods(b, 1)[0].Name
	tun, err := portforward.OpenTunnel(context.Background(), d.c, portforward.TunnelSpec{Namespace: "demo", Resource: "pod/" + pod, Port: "http"})
	if err != nil {
		b.Fatal(err)
	}
	defer tun.Close()
	kaddr := startKubectlPortForward(b, lab, "c1", "demo", pod)

	var dialer net.Dialer
	kubectlDial := func(ctx context.Context, _, _ string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", kaddr) }
	rates := map[string]float64{}
	for _, keepAlive := range []bool{true, false} {
		for _, via := range []struct {
			name string
			dial func(context.Context, string, string) (net.Conn, error)
		}{{"tunnel", tun.DialContext}, {"kubectl", kubectlDial}} {
			name := fmt.Sprintf("%s/keepalive=%v", via.name, keepAlive)
			b.Run(name, func(b *testing.B) {
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
					DialContext: via.dial, DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 64,
					IdleConnTimeout: 5 * time.Second, // see TestLabTunnelSustained500rps
				}}
				defer client.CloseIdleConnections()
				var failed atomic.Int64
				var firstErr atomic.Value
				b.SetParallelism(8) // 8 × GOMAXPROCS concurrent requests
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if body, err := get(client, "http://web/"); err != nil || body != "pod="+pod {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, fmt.Sprint(body, err))
						}
					}
				})
				rate := float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(rate, "req/s")
				b.ReportMetric(float64(failed.Load()), "failed")
				if failed.Load() > 0 {
					b.Errorf("%d of %d requests failed, first: %v", failed.Load(), b.N, firstErr.Load())
				}
				rates[name] = rate
			})
		}
		k := fmt.Sprintf("keepalive=%v", keepAlive)
		if rk := rates["kubectl/"+k]; rk > 0 {
			b.Logf("%s: tunnel %.0f req/s, kubectl port-forward %.0f req/s, ratio tunnel/kubectl = %.2f",
				k, rates["tunnel/"+k], rk, rates["tunnel/"+k]/rk)
		}
	}
	b.Logf("tunnel stats: %+v", tun.Stats())
}
