package examples_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// OCI image layout documents, as far as the test reads them (OCI image
// spec: image-layout.md, manifest.md, config.md).
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// blob reads a blob of the layout and checks it is what its descriptor
// says: the digest of its bytes and its size.
func blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	algo, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || algo != "sha256" {
		t.Fatalf("descriptor %s: want a sha256 digest", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(ociDir, "blobs", algo, hexDigest))
	if err != nil {
		t.Fatalf("blob %s: %v", d.Digest, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
		t.Fatalf("blob %s: its bytes hash to sha256:%x", d.Digest, sum)
	}
	if int64(len(data)) != d.Size {
		t.Fatalf("blob %s: %d bytes, the descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data
}

func decode(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, data)
	}
}

// TestImageLayout validates the OCI layout `make image` wrote, from
// index.json to the layer's files, extracts the binary and runs it.
func TestImageLayout(t *testing.T) {
	layout, err := os.ReadFile(filepath.Join(ociDir, "oci-layout"))
	if err != nil {
		t.Fatal(err)
	}
	var lv struct {
		Version string `json:"imageLayoutVersion"`
	}
	decode(t, "oci-layout", layout, &lv)
	if lv.Version != "1.0.0" {
		t.Errorf("oci-layout: imageLayoutVersion %q, want 1.0.0", lv.Version)
	}
	raw, err := os.ReadFile(filepath.Join(ociDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx ociIndex
	decode(t, "index.json", raw, &idx)
	if idx.SchemaVersion != 2 || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: schemaVersion %d with %d manifests, want 2 with one image", idx.SchemaVersion, len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("index.json: manifest media type %q", md.MediaType)
	}
	if got := md.Annotations["org.opencontainers.image.ref.name"]; got != imageVersion {
		t.Errorf("index.json: ref name %q, want %q", got, imageVersion)
	}
	var man ociManifest
	decode(t, "manifest", blob(t, md), &man)
	if man.SchemaVersion != 2 || man.Config.MediaType != "application/vnd.oci.image.config.v1+json" || len(man.Layers) != 1 {
		t.Fatalf("manifest: schemaVersion %d, config %q, %d layers; want 2, an OCI config and one layer", man.SchemaVersion, man.Config.MediaType, len(man.Layers))
	}
	var cfg ociConfig
	decode(t, "config", blob(t, man.Config), &cfg)
	if md.Platform == nil || md.Platform.OS != cfg.OS || md.Platform.Architecture != cfg.Architecture || cfg.OS != "linux" {
		t.Errorf("index platform %+v vs config %s/%s", md.Platform, cfg.OS, cfg.Architecture)
	}
	// Non-root: a numeric uid (Kubernetes' runAsNonRoot cannot check a name), not 0.
	uid, _, _ := strings.Cut(cfg.Config.User, ":")
	if uid == "" || uid == "0" || uid == "root" || strings.Trim(uid, "0123456789") != "" {
		t.Errorf("config User %q: want a numeric non-root uid", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/mesh-verify"}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("config Entrypoint %q Cmd %q: want [/mesh-verify] and no Cmd, so a pod's args are mesh-verify's", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": imageVersion, "org.opencontainers.image.source": "https://github.com/mesh-verify/mesh-verify"} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	// The layer: gzip of a tar whose uncompressed digest is the config's diff_id.
	lb := blob(t, man.Layers[0])
	if man.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("layer media type %q", man.Layers[0].MediaType)
	}
	zr, err := gzip.NewReader(bytes.NewReader(lb))
	if err != nil {
		t.Fatal(err)
	}
	tarBytes, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if sum := fmt.Sprintf("sha256:%x", sha256.Sum256(tarBytes)); len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != sum {
		t.Errorf("config diff_ids %v, the layer's tar is %s", cfg.RootFS.DiffIDs, sum)
	}
	files := map[string][]byte{}
	modes := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(tarBytes))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
		files[name], modes[name] = data, h
	}
	bin, ok := files["mesh-verify"]
	if !ok {
		t.Fatalf("the layer has no /mesh-verify; it has %v", slices.Sorted(maps.Keys(files)))
	}
	if m := modes["mesh-verify"].Mode; m&0o111 == 0 {
		t.Errorf("/mesh-verify mode %o: not executable", m)
	}
	// The user the config names exists, so tools that resolve it (and Go's
	// os/user) find a home.
	if !passwdHasUID(files["etc/passwd"], uid) {
		t.Errorf("/etc/passwd has no entry for uid %s:\n%s", uid, files["etc/passwd"])
	}
	if home := modes[strings.TrimPrefix(cfg.Config.WorkingDir, "/")]; home == nil || fmt.Sprint(home.Uid) != uid {
		t.Errorf("working directory %s is not owned by uid %s (runs write their directory there)", cfg.Config.WorkingDir, uid)
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		if _, ok := files["etc/ssl/certs/ca-certificates.crt"]; !ok {
			t.Errorf("this machine has a CA bundle, the image does not")
		}
	}

	// Extracted from the layer: static (no ELF interpreter, no shared
	// libraries; the image has no libc), the same bytes make built, and it runs.
	extracted := filepath.Join(t.TempDir(), "mesh-verify")
	if err := os.WriteFile(extracted, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(extracted)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/mesh-verify has an ELF interpreter: dynamically linked, it cannot run in the image")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("/mesh-verify needs shared libraries %v (%v)", libs, err)
	}
	built, err := os.ReadFile(binary.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, bin) {
		t.Errorf("the layer's /mesh-verify differs from the binary make built")
	}
	r := runCmd(t, nil, extracted, "version", "-o", "json")
	var v struct {
		Name, Version string
	}
	if r.Code != 0 {
		t.Fatalf("mesh-verify version: exit %d\n%s", r.Code, r.Stderr)
	}
	decode(t, "mesh-verify version -o json", []byte(r.Stdout), &v)
	if v.Version != imageVersion {
		t.Errorf("the image's binary says version %q, want %q (make image stamps VERSION)", v.Version, imageVersion)
	}
}

func passwdHasUID(passwd []byte, uid string) bool {
	sc := bufio.NewScanner(bytes.NewReader(passwd))
	for sc.Scan() {
		if f := strings.Split(sc.Text(), ":"); len(f) >= 7 && f[2] == uid {
			return true
		}
	}
	return false
}

// TestDockerfileMatchesImage holds the Dockerfile (for builders with a
// daemon) to the image make writes: a static -trimpath build stamped
// like the Makefile's, and a final stage that runs /mesh-verify as the
// same non-root user. It reads the Dockerfile, it cannot build it here.
func TestDockerfileMatchesImage(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string // instructions per stage
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final one", len(stages))
	}
	build, final := strings.Join(stages[0], "\n"), stages[len(stages)-1]
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=", "./cmd/mesh-verify"} {
		if !strings.Contains(build, want) {
			t.Errorf("Dockerfile build stage lacks %q", want)
		}
	}
	var user, entry string
	for _, ins := range final {
		if u, ok := strings.CutPrefix(ins, "USER "); ok {
			user = strings.TrimSpace(u)
		}
		if e, ok := strings.CutPrefix(ins, "ENTRYPOINT "); ok {
			entry = strings.TrimSpace(e)
		}
	}
	var cfg ociConfig
	var idx ociIndex
	raw, err := os.ReadFile(filepath.Join(ociDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, "index.json", raw, &idx)
	var man ociManifest
	decode(t, "manifest", blob(t, idx.Manifests[0]), &man)
	decode(t, "config", blob(t, man.Config), &cfg)
	if user != cfg.Config.User {
		t.Errorf("Dockerfile USER %q, the OCI image's User %q", user, cfg.Config.User)
	}
	if want, _ := json.Marshal(cfg.Config.Entrypoint); entry != string(want) {
		t.Errorf("Dockerfile ENTRYPOINT %s, the OCI image's %s", entry, want)
	}
}

// imageTool runs tools/image (its own module) as `make image` does.
func imageTool(t *testing.T, args ...string) run {
	t.Helper()
	r := runCmdIn(t, filepath.Join(labtest.RepoRoot(), "tools", "image"), []string{"GOWORK=off", "GOFLAGS=-mod=readonly"},
		"go", append([]string{"run", "."}, args...)...)
	return r
}

// TestImageBuilder: the same binary gives the same image (fixed owners
// and timestamps, so a digest can be checked again), and a dynamically
// linked binary, which the image could not run, is refused by name.
func TestImageBuilder(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(ociDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx ociIndex
	decode(t, "index.json", raw, &idx)
	var man ociManifest
	var cfg ociConfig
	decode(t, "manifest", blob(t, idx.Manifests[0]), &man)
	decode(t, "config", blob(t, man.Config), &cfg)
	again := filepath.Join(t.TempDir(), "oci")
	r := imageTool(t, "-binary", binary.Path, "-out", again, "-version", imageVersion,
		"-revision", cfg.Config.Labels["org.opencontainers.image.revision"])
	if r.Code != 0 {
		t.Fatalf("tools/image: exit %d\n%s", r.Code, r.Stderr)
	}
	raw2, err := os.ReadFile(filepath.Join(again, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx2 ociIndex
	decode(t, "index.json", raw2, &idx2)
	if idx2.Manifests[0].Digest != idx.Manifests[0].Digest {
		t.Errorf("the same binary built images %s and %s", idx.Manifests[0].Digest, idx2.Manifests[0].Digest)
	}

	// A cgo build of a tiny program: dynamically linked against libc.
	dynamic := filepath.Join(t.TempDir(), "dynamic")
	src := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os/user\"\n\nfunc main() { _, _ = user.Current() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b := runCmd(t, []string{"CGO_ENABLED=1", "GOFLAGS="}, "go", "build", "-o", dynamic, src); b.Code != 0 {
		t.Skipf("no cgo toolchain to build a dynamically linked binary: %s", b.Stderr)
	}
	if f, err := elf.Open(dynamic); err == nil {
		interp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		if !interp {
			t.Skip("the cgo build came out static; nothing to refuse")
		}
	}
	r = imageTool(t, "-binary", dynamic, "-out", filepath.Join(t.TempDir(), "oci"))
	if r.Code == 0 || !strings.Contains(r.Stderr, "dynamically linked") || !strings.Contains(r.Stderr, "CGO_ENABLED=0") {
		t.Errorf("tools/image with a dynamically linked binary: exit %d, want a refusal naming it and CGO_ENABLED=0:\n%s", r.Code, r.Stderr)
	}
}
