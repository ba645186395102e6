// Package certpem keeps the certificates of a PEM bundle and refuses a
// bundle that holds a private key: a CA file (target.tls.ca) needs only
// certificates, and one that also carries a key must not travel further
// (to a worker's Secret, a report, a log). Nothing of a refused block is
// ever echoed: errors name its position and type only.
package certpem

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ErrPrivateKey matches the error of a bundle that holds a private key.
var ErrPrivateKey = errors.New("holds a private key")

// ErrNoCertificate matches the error of a bundle without a certificate.
var ErrNoCertificate = errors.New("holds no PEM certificate")

// Certificates returns the CERTIFICATE blocks of data, PEM-encoded again
// (headers, text between blocks and every other block type dropped), after
// checking that each parses. A block whose type names a private key (RSA,
// EC, PKCS #8, encrypted, OpenSSH ...) is an error, as is a bundle with no
// certificate.
func Certificates(data []byte) ([]byte, error) {
	all := data
	var out bytes.Buffer
	n := 0
	for i := 1; ; i++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch {
		case strings.Contains(b.Type, "PRIVATE KEY"):
			// The type is one of a fixed set of words; b.Bytes is never
			// printed.
			return nil, fmt.Errorf("PEM block %d (%s) %w: a CA file needs only the certificates; remove the key", i, printable(b.Type), ErrPrivateKey)
		case b.Type != "CERTIFICATE":
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("PEM block %d (CERTIFICATE): %w", i, err)
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}); err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		n++
	}
	// A key whose PEM armour is damaged is no block pem.Decode returns
	// (it skips it and goes on); its BEGIN line still says what it is.
	if bytes.Contains(all, []byte("PRIVATE KEY-----")) {
		return nil, fmt.Errorf("a damaged PEM private key block: %w", ErrPrivateKey)
	}
	if n == 0 {
		return nil, ErrNoCertificate
	}
	return out.Bytes(), nil
}

// printable keeps a block type's letters, digits and spaces, at most 40.
func printable(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == ' ' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '?'
		}
	}
	if len(b) > 40 {
		b = append(b[:40], "..."...)
	}
	return string(b)
}
