package meshconfig

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Ref
		wantErr string
	}{
		{in: "VirtualService/bookinfo/reviews", want: Ref{Kind: KindVirtualService, Namespace: "bookinfo", Name: "reviews"}},
		{in: "vs/bookinfo/reviews#canary@c2", want: Ref{Kind: KindVirtualService, Namespace: "bookinfo", Name: "reviews", Section: "canary", Cluster: "c2"}},
		{in: "meshHTTPRoute/kuma-demo/r#test-server", want: Ref{Kind: KindMeshHTTPRoute, Namespace: "kuma-demo", Name: "r", Section: "test-server"}},
		{in: "TrafficRoute/test-server", want: Ref{Kind: KindTrafficRoute, Name: "test-server"}},
		{in: "svc/rb/rebel-base@c1", want: Ref{Kind: KindService, Namespace: "rb", Name: "rebel-base", Cluster: "c1"}},
		{in: "Skupper/hello/backend", want: Ref{Kind: KindSkupper, Namespace: "hello", Name: "backend"}},
		{in: "Gateway/ns/x", wantErr: `kind "Gateway"`},
		{in: "VirtualService/reviews", wantErr: "want VirtualService/NAMESPACE/NAME"},
		{in: "TrafficRoute/ns/x", wantErr: "cluster-scoped"},
		{in: "VirtualService/Bookinfo/reviews", wantErr: `namespace "Bookinfo"`},
		{in: "VirtualService/b/reviews#", wantErr: "empty section"},
		{in: "VirtualService/b/reviews@", wantErr: "empty cluster"},
		{in: "VirtualService/b/re_views", wantErr: `name "re_views"`},
		{in: "VirtualService/b/r#a#b", wantErr: "section"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRef(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRef(%q) = %+v, %v; want error containing %q", tt.in, r, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r != tt.want {
				t.Errorf("ParseRef(%q) = %+v, want %+v", tt.in, r, tt.want)
			}
		})
	}
}

// FuzzParseRef checks that whatever ParseRef accepts is valid and
// survives String and ParseRef again unchanged.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"VirtualService/bookinfo/reviews#canary@c2", "TrafficRoute/x", "svc/a/b", "vs/a/b@", "Skupper/a/b#c#d@e@f", "MeshHTTPRoute//x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseRef(%q) = %+v, which Validate refuses: %v", s, r, err)
		}
		again, err := ParseRef(r.String())
		if err != nil {
			t.Fatalf("ParseRef(%q) = %+v, but its String %q does not parse: %v", s, r, r.String(), err)
		}
		if again != r {
			t.Fatalf("ParseRef(%q) = %+v; round trip through %q gives %+v", s, r, r.String(), again)
		}
	})
}
