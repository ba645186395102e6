package runner

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/mesh-verify/mesh-verify/scenarios"
)

// gRPC unary calls against grpc-go's own server (cleartext HTTP/2, as
// between sidecars): the health check of a serving service answers, and
// its cluster is read from the call's trailers by a header rule; an
// unknown service's grpc-status 5 is a failure with its name, though
// HTTP said 200.
func TestGRPCUnaryCalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-served-by", "pod grpc-0 in c1"))
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("callme", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	for _, c := range []struct {
		service   string
		successes int64
		errText   string
	}{
		{"callme", 20, ""},
		{"", 20, ""}, // the empty message: the server's overall health
		{"nope", 0, "grpc-status 5 NotFound"},
	} {
		t.Run("service "+c.service, func(t *testing.T) {
			sc, err := scenarios.Parse("g.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: grpc}
clusters: [{name: c1}]
target: {url: "http://`+ln.Addr().String()+`"}
attack: {rate: 100, requests: 20, grpc: {method: /grpc.health.v1.Health/Check, message: "`+c.service+`"}}
attribution: {rules: [{header: X-Served-By, regex: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]}
expect: [{successRate: {atLeast: 99%}}]
`))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), sc, Options{})
			if rep == nil {
				t.Fatalf("no report: %v", err)
			}
			if rep.Metrics.Successes != c.successes {
				t.Errorf("%d answered, want %d; errors %+v", rep.Metrics.Successes, c.successes, rep.Metrics.Errors)
			}
			if c.errText != "" && (len(rep.Metrics.Errors) == 0 || !strings.Contains(rep.Metrics.Errors[0].Message, c.errText)) {
				t.Errorf("errors %+v, want %q", rep.Metrics.Errors, c.errText)
			}
			if c.successes > 0 {
				var clusters int64
				for _, d := range rep.Dimensions {
					if d.Name == "cluster" && d.Source == "body" {
						clusters = d.Attributed
					}
				}
				if clusters != c.successes {
					t.Errorf("%d calls attributed a cluster from the trailers, want %d", clusters, c.successes)
				}
			}
		})
	}
}
