// Package nginxbin finds the machine's nginx, the third-party proxy the
// benchmarks measure against and the lab uses as a data plane and as
// ground truth. It lives in the product module so that both the product's
// benchmarks and the lab module (lab/nginx) find it the same way.
package nginxbin

import (
	"errors"
	"os"
	"os/exec"
)

// ErrMissing says nginx is not installed, and how to install it.
var ErrMissing = errors.New("nginx is not installed (Debian: apt-get install nginx-light)")

// Find returns the nginx executable: where Debian's nginx-light installs
// it, else nginx on PATH.
func Find() (string, error) {
	for _, p := range []string{"/usr/sbin/nginx", "/usr/bin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	return "", ErrMissing
}
