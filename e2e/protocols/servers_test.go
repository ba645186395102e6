package protocols_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// pod is one backend identity behind a server: what it answers with and
// how many requests it served (the ground truth the report is checked
// against).
type pod struct {
	name, cluster, version string
	weight                 int
}

// balancer is nginx's smooth weighted round robin over the pods: the
// server plays the mesh's per-request balancer, so each pod's count is
// exact (weights 2:1:1 give 2:1:1 of any multiple of 4) and a correct
// expectation cannot fail by chance.
type balancer struct {
	mu      sync.Mutex
	pods    []pod
	current []int
	served  map[string]int64
	// protoMajor counts the requests by the HTTP major version the server
	// read them in.
	protoMajor map[int]int64
}

func newBalancer(pods ...pod) *balancer {
	return &balancer{pods: pods, current: make([]int, len(pods)), served: map[string]int64{}, protoMajor: map[int]int64{}}
}

// next picks the pod of one request and counts it.
func (b *balancer) next(protoMajor int) pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	total, best := 0, 0
	for i, p := range b.pods {
		b.current[i] += p.weight
		total += p.weight
		if b.current[i] > b.current[best] {
			best = i
		}
	}
	b.current[best] -= total
	p := b.pods[best]
	b.served[p.name]++
	b.protoMajor[protoMajor]++
	return p
}

// counts is a copy of what was served per pod, per cluster and per
// version, and by HTTP major version.
func (b *balancer) counts() (byPod, byCluster, byVersion map[string]int64, byProto map[int]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	byPod, byCluster, byVersion, byProto = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[int]int64{}
	for _, p := range b.pods {
		n := b.served[p.name]
		if n == 0 {
			continue
		}
		byPod[p.name] += n
		byCluster[p.cluster] += n
		byVersion[p.version] += n
	}
	for k, v := range b.protoMajor {
		byProto[k] = v
	}
	return
}

// startH2C serves cleartext HTTP/2 with prior knowledge (and HTTP/1.1,
// which is how the test shows the counter tells them apart) through
// net/http (Server.Protocols with unencrypted HTTP/2). Each answer is the tutorial's callme line
// naming the pod and its cluster in the body, and the cluster again in a
// response header.
func startH2C(t *testing.T, b *balancer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := b.next(r.ProtoMajor)
		w.Header().Set("X-Served-Cluster", p.cluster)
		fmt.Fprintf(w, "I'm callme-service %s (pod %s in %s)", p.version, p.name, p.cluster)
	})
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: protos, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// podKey carries a call's pod from the interceptor to the echo method.
type podKey struct{}

// startGRPC serves grpc-go's own health service and a unary method shaped
// like Istio's echo (proto.EchoTestService/Echo: a message whose field 1
// is a string, answered by one whose field 1 is the "Key=value" lines the
// echo app writes, Hostname being the pod). An interceptor picks each
// call's pod and names it, with its cluster, in the call's trailers.
func startGRPC(t *testing.T, b *balancer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		// grpc-go serves HTTP/2 only: every call it answers came as one.
		p := b.next(2)
		if err := grpc.SetTrailer(ctx, metadata.Pairs("x-served-by", fmt.Sprintf("pod %s in %s", p.name, p.cluster))); err != nil {
			return nil, err
		}
		return h(context.WithValue(ctx, podKey{}, p), req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("callme", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	srv.RegisterService(&echoService, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

// echoService is proto.EchoTestService with its unary Echo. EchoRequest
// and EchoResponse each have one string field numbered 1, which is the
// wire shape of wrapperspb.StringValue: no generated code is needed.
var echoService = grpc.ServiceDesc{
	ServiceName: "proto.EchoTestService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			info := &grpc.UnaryServerInfo{FullMethod: "/proto.EchoTestService/Echo"}
			return intercept(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return wrapperspb.String(echoBody(ctx, req.(*wrapperspb.StringValue).GetValue())), nil
			})
		},
	}},
}

// echoBody writes the lines Istio's echo answers a gRPC Echo with: the
// request's metadata first, then the pod's fields, Hostname last.
func echoBody(ctx context.Context, message string) string {
	p, _ := ctx.Value(podKey{}).(pod)
	var b strings.Builder
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(":authority") {
		fmt.Fprintf(&b, "Host=%s\n", v)
	}
	for k, vs := range md {
		for _, v := range vs {
			fmt.Fprintf(&b, "RequestHeader=%s:%s\n", k, v)
		}
	}
	ip := "0.0.0.0"
	if pr, ok := peer.FromContext(ctx); ok {
		ip, _, _ = net.SplitHostPort(pr.Addr.String())
	}
	for _, kv := range [][2]string{{"StatusCode", strconv.Itoa(http.StatusOK)}, {"ServiceVersion", p.version}, {"ServicePort", "7070"},
		{"Cluster", p.cluster}, {"Namespace", "echo"}, {"IP", ip}, {"Proto", "GRPC"}, {"Echo", message}, {"Hostname", p.name}} {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return b.String()
}
