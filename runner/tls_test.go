package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/scenarios"
)

// An https target's certificate is verified by default: a self-signed one
// is a setup error that says how to trust it, before any request; with its
// authority as target.tls.ca the run goes through; insecureSkipVerify
// accepts it and the report says so.
func TestTargetTLSIsVerified(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "I'm callme-service v1 (pod callme-c1-0 in c1)")
	}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another authority: httptest's servers all share one certificate.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, tls string
		setup     string // substring of the setup error, or "" for a run
		warning   bool
	}{
		{"default: verified with the system roots", "", "certificate signed by unknown authority", false},
		{"ca: its authority", "{ca: ca.pem}", "", false},
		{"ca: another authority", "{ca: other.pem}", "certificate signed by unknown authority", false},
		{"serverName the certificate does not carry", "{ca: ca.pem, serverName: callme.demo}", "not callme.demo", false},
		{"serverName it carries", "{ca: ca.pem, serverName: example.com}", "", false},
		{"insecureSkipVerify", "{insecureSkipVerify: true}", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := fmt.Sprintf("target: {url: %q}", ts.URL)
			if c.tls != "" {
				target = fmt.Sprintf("target: {url: %q, tls: %s}", ts.URL, c.tls)
			}
			file := filepath.Join(dir, "s.yaml")
			sc, err := scenarios.Parse(file, []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters: [{name: c1}]
`+target+`
attack: {rate: 50, requests: 10}
attribution: {rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]}
expect: [{successRate: {atLeast: 99%}}]
`))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), sc, Options{})
			if c.setup != "" {
				var se *SetupError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), c.setup) || !strings.Contains(err.Error(), "target.tls.ca") {
					t.Fatalf("want a setup error with %q and the advice, got %v", c.setup, err)
				}
				return
			}
			if err != nil || rep.Metrics.Successes != 10 {
				t.Fatalf("run: %v, %+v", err, rep)
			}
			warned := slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "not verified") })
			if warned != c.warning {
				t.Errorf("warnings %q; want the insecure warning: %v", rep.Warnings, c.warning)
			}
		})
	}
}
