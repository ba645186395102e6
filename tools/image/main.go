// Command image writes mesh-verify's container image as an OCI image
// layout (a directory any OCI tool reads: `skopeo copy oci:build/oci
// docker://…`, `crane push`, `podman load`), without a container daemon:
// CI machines have none. It is the daemon-less twin of the repository's
// Dockerfile (README.md, "Container image"): the same static binary at
// /mesh-verify, run as the non-root user 65532, nothing else but the
// files a Go program on a real cluster wants (/etc/passwd, /etc/group, a
// CA bundle, a writable home and /tmp).
//
// It uses github.com/google/go-containerregistry, the library ko and crane
// are built on, rather than hand-written manifests: digests, media types
// and the index are its job. It lives in a module of its own (like
// tools/lab) so the main module does not depend on it.
//
//	go run . -binary ../../build/image/mesh-verify -out ../../build/oci -version v1.2.3
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is distroless' non-root user, so the image and the Dockerfile's
// gcr.io/distroless/static:nonroot stage run as the same uid.
const (
	nonrootUID = 65532
	nonrootDir = "home/nonroot"
)

// caBundles are where Debian/Ubuntu/Alpine and Fedora/RHEL keep the system
// CA bundle; Go's crypto/x509 reads the first of them on Linux.
var caBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"}

type options struct {
	binaries                                 []string
	out, version, source, revision, caBundle string
	created                                  time.Time
}

// binaryFlags collects -binary, given once per architecture.
type binaryFlags struct{ paths *[]string }

func (b binaryFlags) String() string {
	if b.paths == nil {
		return ""
	}
	return fmt.Sprint(*b.paths)
}

func (b binaryFlags) Set(s string) error { *b.paths = append(*b.paths, s); return nil }

func main() {
	var o options
	flag.Var(binaryFlags{&o.binaries}, "binary", "a statically linked Linux mesh-verify binary (CGO_ENABLED=0); once per architecture for a multi-arch image (linux/amd64 and linux/arm64 from `make release`)")
	flag.StringVar(&o.out, "out", "build/oci", "OCI image layout directory to write (replaced)")
	flag.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version label and the layout's ref name")
	flag.StringVar(&o.source, "source", "https://github.com/mesh-verify/mesh-verify", "org.opencontainers.image.source label")
	flag.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision label (git commit), if known")
	flag.StringVar(&o.caBundle, "ca-bundle", "auto", "CA bundle to ship as /etc/ssl/certs/ca-certificates.crt: a file, auto (the build machine's, if any) or none")
	flag.Parse()
	// SOURCE_DATE_EPOCH (reproducible-builds.org) fixes every timestamp, so
	// the same binary gives the same digests; without it, the Unix epoch.
	o.created = time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail(fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970: %w", s, err))
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	if len(o.binaries) == 0 {
		fail(errors.New("-binary is required"))
	}
	digest, err := build(o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s %s\n", o.out, digest)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// build writes the layout and returns the digest of what its ref names:
// the image manifest for one binary, the image index (a multi-arch image,
// one manifest per architecture) for several.
func build(o options) (v1.Hash, error) {
	type built struct {
		img  v1.Image
		arch string
	}
	var imgs []built
	seen := map[string]string{}
	for _, path := range o.binaries {
		img, arch, err := image(o, path)
		if err != nil {
			return v1.Hash{}, err
		}
		if prev, ok := seen[arch]; ok {
			return v1.Hash{}, fmt.Errorf("-binary %s and %s are both linux/%s: give one binary per architecture", prev, path, arch)
		}
		seen[arch] = path
		imgs = append(imgs, built{img, arch})
	}
	if err := os.RemoveAll(o.out); err != nil {
		return v1.Hash{}, fmt.Errorf("replace %s: %w", o.out, err)
	}
	p, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %s: %w", o.out, err)
	}
	ref := layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version})
	if len(imgs) == 1 {
		if err := p.AppendImage(imgs[0].img, ref, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: imgs[0].arch})); err != nil {
			return v1.Hash{}, fmt.Errorf("write image into %s: %w", o.out, err)
		}
		return imgs[0].img.Digest()
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range imgs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: b.img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: b.arch}}})
	}
	if err := p.AppendIndex(idx, ref); err != nil {
		return v1.Hash{}, fmt.Errorf("write image index into %s: %w", o.out, err)
	}
	return idx.Digest()
}

// image is the image of one binary and its architecture.
func image(o options, path string) (v1.Image, string, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read binary: %w", err)
	}
	arch, err := staticArch(path)
	if err != nil {
		return nil, "", err
	}
	ca, caPath, err := readCABundle(o.caBundle)
	if err != nil {
		return nil, "", err
	}
	files, err := rootFS(bin, ca, o.created)
	if err != nil {
		return nil, "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(files)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, "", fmt.Errorf("layer: %w", err)
	}
	user := strconv.Itoa(nonrootUID) + ":" + strconv.Itoa(nonrootUID)
	labels := map[string]string{
		"org.opencontainers.image.title":       "mesh-verify",
		"org.opencontainers.image.description": "Check where a multi-cluster service mesh really sends traffic",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.source":      o.source,
	}
	if o.revision != "" {
		labels["org.opencontainers.image.revision"] = o.revision
	}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: o.created},
		Config: v1.Config{
			User:       user,
			Entrypoint: []string{"/mesh-verify"},
			WorkingDir: "/" + nonrootDir,
			Env:        []string{"HOME=/" + nonrootDir, "PATH=/"},
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	history := "tools/image: /mesh-verify, /etc/passwd (nonroot 65532)"
	if caPath != "" {
		history += ", CA bundle from " + caPath
	}
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: history}}); err != nil {
		return nil, "", fmt.Errorf("append layer: %w", err)
	}
	return img, arch, nil
}

// staticArch refuses a binary the image could not run (no dynamic loader
// in it, so one with an interpreter would fail with "no such file") and
// says which architecture it is for.
func staticArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: not a Linux ELF binary: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0", path)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "386", nil
	case elf.EM_ARM:
		return "arm", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	}
	return "", fmt.Errorf("%s: ELF machine %s has no Go architecture name here", path, f.Machine)
}

func readCABundle(spec string) (data []byte, path string, err error) {
	switch spec {
	case "none":
		return nil, "", nil
	case "auto":
		for _, p := range caBundles {
			if data, err := os.ReadFile(p); err == nil {
				return data, p, nil
			}
		}
		// A lab on 127.0.0.1 needs none; real clusters' API servers have
		// their CA in the kubeconfig, only public endpoints need this.
		fmt.Fprintln(os.Stderr, "image: no system CA bundle on this machine; the image has none")
		return nil, "", nil
	}
	data, err = os.ReadFile(spec)
	if err != nil {
		return nil, "", fmt.Errorf("-ca-bundle: %w", err)
	}
	return data, spec, nil
}

// rootFS is the image's only layer, an uncompressed tar with fixed owners
// and timestamps.
func rootFS(bin, ca []byte, mtime time.Time) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid      int
		data     []byte
		dir      bool
		skipWhen bool
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/%s:/sbin/nologin\n", nonrootUID, nonrootUID, nonrootDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonrootUID)
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl/", mode: 0o755, dir: true, skipWhen: ca == nil},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true, skipWhen: ca == nil},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca, skipWhen: ca == nil},
		{name: "home/", mode: 0o755, dir: true},
		// The working directory: runs write mesh-verify-runs/ here.
		{name: nonrootDir + "/", mode: 0o700, uid: nonrootUID, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "mesh-verify", mode: 0o755, data: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if e.skipWhen {
			continue
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX}
		if e.uid != 0 {
			h.Uname, h.Gname = "nonroot", "nonroot"
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", filepath.Clean(e.name), err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}
