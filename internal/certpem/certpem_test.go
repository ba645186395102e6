package certpem

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/internal/certtest"
)

func TestCertificates(t *testing.T) {
	t.Parallel()
	cert, key := certtest.Pair(t)
	cert2, _ := certtest.Pair(t)
	ecKey := bytes.Replace(key, []byte("PRIVATE KEY"), []byte("EC PRIVATE KEY"), 2)
	damaged := bytes.Replace(key, []byte("-----END PRIVATE KEY-----"), nil, 1)
	for _, tc := range []struct {
		name string
		in   []byte
		want []byte // the result; nil with err
		err  error
	}{
		{"one certificate", cert, cert, nil},
		{"two, text and other blocks dropped", join([]byte("# bundle\n"), cert, []byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"), cert2), join(cert, cert2), nil},
		{"a PKCS #8 key after the certificate", join(cert, key), nil, ErrPrivateKey},
		{"an EC key before it", join(ecKey, cert), nil, ErrPrivateKey},
		{"a damaged key before it", join(damaged, cert), nil, ErrPrivateKey},
		{"only a key", key, nil, ErrPrivateKey},
		{"nothing", []byte("not PEM"), nil, ErrNoCertificate},
		{"empty", nil, nil, ErrNoCertificate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Certificates(tc.in)
			if !errors.Is(err, tc.err) || !bytes.Equal(got, tc.want) {
				t.Fatalf("Certificates = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
			if err != nil {
				checkNoKey(t, err.Error(), key, ecKey)
			}
		})
	}
	if _, err := Certificates([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")); err == nil || !strings.Contains(err.Error(), "PEM block 1 (CERTIFICATE)") {
		t.Errorf("a certificate that does not parse: %v", err)
	}
}

// checkNoKey fails if msg holds any line of a key's base64.
func checkNoKey(t testing.TB, msg string, keys ...[]byte) {
	t.Helper()
	for _, k := range keys {
		for _, line := range strings.Split(string(k), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line) {
				t.Fatalf("error %q echoes key material %q", msg, line)
			}
		}
	}
}

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// FuzzCertificates: whatever a CA file holds, Certificates returns only
// CERTIFICATE blocks that parse, refuses every bundle naming a private
// key, and never puts the input's bytes in an error beyond a block type.
func FuzzCertificates(f *testing.F) {
	cert, key := certtest.Pair(f)
	f.Add(cert)
	f.Add(join(cert, key))
	f.Add([]byte("-----BEGIN \x1b[31mPRIVATE KEY-----\nAAAA\n-----END \x1b[31mPRIVATE KEY-----\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Certificates(data)
		if err != nil {
			if got != nil {
				t.Fatalf("result %q with error %v", got, err)
			}
			for _, c := range err.Error() {
				if c < 0x20 || c == 0x7f {
					t.Fatalf("control byte in error %q", err)
				}
			}
			return
		}
		if bytes.Contains(data, []byte("PRIVATE KEY-----")) {
			t.Fatalf("accepted a bundle naming a private key: %q", data)
		}
		rest, n := got, 0
		for {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if _, perr := x509.ParseCertificate(b.Bytes); b.Type != "CERTIFICATE" || len(b.Headers) > 0 || perr != nil {
				t.Fatalf("output block %q headers %v: %v", b.Type, b.Headers, perr)
			}
			n++
		}
		if n == 0 || len(bytes.TrimSpace(rest)) > 0 {
			t.Fatalf("output %q: %d certificates, %d bytes left", got, n, len(rest))
		}
	})
}
