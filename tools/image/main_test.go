package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestMultiArch: one -binary per architecture gives an OCI layout whose
// ref names an image index with one linux manifest per architecture (what
// `make release` pushes as ghcr.io/mesh-verify/mesh-verify:<version>), each
// image holding its own binary; two binaries of one architecture are
// refused. The binaries are a tiny static program cross-built here: the
// layout does not care what the program is, and building mesh-verify twice
// would only slow the test.
func TestMultiArch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		bins[arch] = filepath.Join(dir, arch, "mesh-verify")
		cmd := exec.Command("go", "build", "-o", bins[arch], src)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", arch, err, out)
		}
	}
	o := options{binaries: []string{bins["amd64"], bins["arm64"]}, out: filepath.Join(dir, "oci"), version: "v0.0.0-test",
		caBundle: "none", created: time.Unix(0, 0).UTC()}
	digest, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(o.out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != digest ||
		tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != o.version {
		t.Fatalf("index.json %+v: want one entry, the image index %s named %s", tm.Manifests, digest, o.version)
	}
	idx, err := top.ImageIndex(digest)
	if err != nil {
		t.Fatalf("the ref does not name an image index: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("manifest %s has platform %+v, want linux", d.Digest, d.Platform)
		}
		archs = append(archs, d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != d.Platform.Architecture {
			t.Errorf("image %s: config says %s, the index %s", d.Digest, cfg.Architecture, d.Platform.Architecture)
		}
	}
	if strings.Join(archs, ",") != "amd64,arm64" {
		t.Errorf("index architectures %q, want amd64,arm64", archs)
	}

	o.binaries = []string{bins["amd64"], bins["amd64"]}
	o.out = filepath.Join(dir, "twice")
	if _, err := build(o); err == nil || !strings.Contains(err.Error(), "both linux/amd64") {
		t.Errorf("two amd64 binaries: %v, want a refusal naming the architecture", err)
	}
}
