package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

const testVersion = "v0.0.0-release-test"

// TestRelease builds the release for this machine's platform (the others
// differ only in GOOS/GOARCH, and building all four would double the
// test's time) and checks every artifact the way a user or krew consumes
// it: the archive unpacks to a binary that says its version, LICENSE and
// README; checksums.txt verifies; the SBOM is CycloneDX that names what
// the binary links; krew's own validator accepts the manifest, whose
// checksum is the archive's. A second build of the same source gives the
// same archive bytes.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mesh-verify twice")
	}
	host := platform{runtime.GOOS, runtime.GOARCH}
	o := options{version: testVersion, src: "../..", out: t.TempDir(), repo: "mesh-verify/mesh-verify",
		platforms: []platform{host}, epoch: time.Unix(1700000000, 0).UTC()}
	arts, err := release(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	base := "mesh-verify_" + testVersion + "_" + host.os + "_" + host.arch
	want := []string{base + ".tar.gz", base + ".sbom.cdx.json", "checksums.txt", "mesh-verify.yaml"}
	if len(arts) != len(want) {
		t.Fatalf("artifacts %q, want %q", arts, want)
	}
	for i, a := range arts {
		if filepath.Base(a) != want[i] {
			t.Errorf("artifact %d is %s, want %s", i, filepath.Base(a), want[i])
		}
	}
	archive := filepath.Join(o.out, want[0])

	t.Run("archive", func(t *testing.T) {
		dir := t.TempDir()
		names := untar(t, archive, dir)
		if strings.Join(names, ",") != "mesh-verify,LICENSE,README.md" {
			t.Errorf("archive holds %q, want mesh-verify, LICENSE, README.md", names)
		}
		out, err := exec.Command(filepath.Join(dir, "mesh-verify"), "version", "-o", "json").Output()
		if err != nil {
			t.Fatalf("mesh-verify version from the archive: %v", err)
		}
		var v struct{ Version string }
		if err := json.Unmarshal(out, &v); err != nil || v.Version != testVersion {
			t.Errorf("version -o json = %s (%v), want version %s", out, err, testVersion)
		}
	})

	t.Run("checksums", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(o.out, "checksums.txt"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			t.Fatalf("checksums.txt has %d lines, want 2 (archive, SBOM):\n%s", len(lines), b)
		}
		for _, l := range lines {
			sum, name, ok := strings.Cut(l, "  ")
			if !ok {
				t.Fatalf("checksums.txt line %q is not sha256sum's format", l)
			}
			got, err := sha256File(filepath.Join(o.out, name))
			if err != nil {
				t.Fatal(err)
			}
			if got != sum {
				t.Errorf("checksums.txt says %s for %s, the file's sha256 is %s", sum, name, got)
			}
		}
		// sha256sum itself, where the machine has it, agrees.
		if _, err := exec.LookPath("sha256sum"); err == nil {
			c := exec.Command("sha256sum", "-c", "checksums.txt")
			c.Dir = o.out
			if out, err := c.CombinedOutput(); err != nil {
				t.Errorf("sha256sum -c checksums.txt: %v\n%s", err, out)
			}
		}
	})

	t.Run("sbom", func(t *testing.T) {
		f, err := os.Open(filepath.Join(o.out, want[1]))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatalf("the SBOM is not CycloneDX JSON: %v", err)
		}
		if bom.SpecVersion != cdx.SpecVersion1_6 || bom.Metadata == nil || bom.Metadata.Component == nil ||
			bom.Metadata.Component.Version != testVersion {
			t.Fatalf("SBOM spec %v, metadata %+v: want 1.6 describing mesh-verify %s", bom.SpecVersion, bom.Metadata, testVersion)
		}
		linked := map[string]string{}
		for _, c := range *bom.Components {
			linked[c.Name] = c.Version
		}
		if v := linked["github.com/tsenart/vegeta/v12"]; !strings.HasPrefix(v, "v12.") {
			t.Errorf("SBOM names vegeta %q, want the v12 the binary links", v)
		}
		// goldmark and the JSON Schema validator are test-only or absent:
		// the SBOM lists what is linked, not what go.mod mentions.
		if _, ok := linked["github.com/stretchr/testify"]; ok {
			t.Error("SBOM lists testify, which the binary does not link")
		}
	})

	t.Run("krew", func(t *testing.T) {
		manifest := filepath.Join(o.out, "mesh-verify.yaml")
		b, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := sha256File(archive)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "sha256: "+sum+"\n") ||
			!strings.Contains(string(b), "/releases/download/"+testVersion+"/"+want[0]+"\n") {
			t.Errorf("krew manifest does not point at the archive %s with sha256 %s:\n%s", want[0], sum, b)
		}
		if out, err := validateKrew(t, manifest); err != nil {
			t.Errorf("krew's validate-krew-manifest refused the manifest: %v\n%s", err, out)
		}
		// The validator can say no: a manifest whose file name is not the
		// plugin's name is refused.
		renamed := filepath.Join(t.TempDir(), "other.yaml")
		if err := os.WriteFile(renamed, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := validateKrew(t, renamed); err == nil {
			t.Errorf("validate-krew-manifest accepted a manifest named other.yaml for plugin mesh-verify:\n%s", out)
		}
	})

	t.Run("action", func(t *testing.T) { testAction(t, o.out) })

	t.Run("reproducible", func(t *testing.T) {
		again := o
		again.out = t.TempDir()
		if _, err := release(context.Background(), again); err != nil {
			t.Fatal(err)
		}
		a, _ := sha256File(archive)
		b, _ := sha256File(filepath.Join(again.out, want[0]))
		if a != b {
			t.Errorf("two builds of the same source gave archives %s and %s", a, b)
		}
	})
}

// validateKrew runs krew's own manifest validator (a tool of this module,
// go.mod's tool directive) without installing (that needs kubectl krew).
func validateKrew(t *testing.T, manifest string) ([]byte, error) {
	t.Helper()
	return exec.Command("go", "tool", "validate-krew-manifest", "-manifest", manifest, "-skip-install").CombinedOutput()
}

func untar(t *testing.T, archive, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		out, err := os.OpenFile(filepath.Join(dir, filepath.Base(h.Name)), os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
}

// TestReleaseRefusesBadInput: each bad flag value is refused before
// anything is built, naming the flag.
func TestReleaseRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, version, platforms, want string }{
		{"no v", "1.2.3", "linux/amd64", "-version"},
		{"not semver", "latest", "linux/amd64", "-version"},
		{"build metadata", "v1.2.3+abc", "linux/amd64", "-version"},
		{"unknown platform", "v1.2.3", "linux/amd65", "-platforms"},
		{"twice", "v1.2.3", "linux/amd64,linux/amd64", "-platforms"},
		{"none", "v1.2.3", " , ", "-platforms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps, err := parsePlatforms(tc.platforms)
			if err == nil {
				out := t.TempDir()
				_, err = release(context.Background(), options{version: tc.version, src: "../..", out: out,
					repo: "mesh-verify/mesh-verify", platforms: ps})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
