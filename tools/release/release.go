package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// defaultPlatforms are the release's targets: what platform engineers run
// kubectl on (Linux and macOS laptops, CI runners, arm64 nodes).
var defaultPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

type options struct {
	version, src, out, repo string
	platforms               []platform
	epoch                   time.Time
}

// supported are the GOOS/GOARCH pairs the binary is known to build for
// and krew knows how to select; anything else is a typo until shown
// otherwise.
var supported = map[string]bool{
	"linux/amd64": true, "linux/arm64": true, "darwin/amd64": true, "darwin/arm64": true,
	"linux/arm": true, "linux/ppc64le": true, "linux/s390x": true, "windows/amd64": true,
}

func parsePlatforms(s string) ([]platform, error) {
	var ps []platform
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !supported[f] {
			return nil, usageError{fmt.Errorf("-platforms: %q is not one of the supported GOOS/GOARCH pairs", f)}
		}
		if seen[f] {
			return nil, usageError{fmt.Errorf("-platforms: %q given twice", f)}
		}
		seen[f] = true
		o, a, _ := strings.Cut(f, "/")
		ps = append(ps, platform{o, a})
	}
	if len(ps) == 0 {
		return nil, usageError{fmt.Errorf("-platforms: no platform given")}
	}
	return ps, nil
}

// sourceDateEpoch is SOURCE_DATE_EPOCH (reproducible-builds.org), the
// timestamp of every file in the archives; without it the Unix epoch, so
// that two builds of one commit are byte-identical either way.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, usageError{fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative number of seconds since 1970", s)}
	}
	return time.Unix(sec, 0).UTC(), nil
}

// release writes every artifact into o.out and returns their paths.
func release(ctx context.Context, o options) ([]string, error) {
	// krew and `go install …@version` both want a semantic version with a
	// leading v; a release called "latest" or "1.2" would break both.
	if !semver.IsValid(o.version) || semver.Build(o.version) != "" {
		return nil, usageError{fmt.Errorf("-version %q: want a semantic version with a leading v and no build metadata, e.g. v1.2.3 or v1.3.0-rc.1", o.version)}
	}
	if strings.Count(o.repo, "/") != 1 {
		return nil, usageError{fmt.Errorf("-repo %q: want owner/name", o.repo)}
	}
	src, err := filepath.Abs(o.src)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(src, "cmd", "mesh-verify")); err != nil {
		return nil, usageError{fmt.Errorf("-src %s: not a mesh-verify checkout (no cmd/mesh-verify): %w", o.src, err)}
	}
	extra := map[string][]byte{}
	for _, name := range []string{"LICENSE", "README.md"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			// krew refuses a plugin whose archive carries no license.
			return nil, fmt.Errorf("read %s for the archives: %w", name, err)
		}
		extra[name] = b
	}
	if err := os.RemoveAll(o.out); err != nil {
		return nil, fmt.Errorf("replace %s: %w", o.out, err)
	}
	var arts []string
	var sums []checksum
	var krewPlatforms []krewPlatform
	for _, p := range o.platforms {
		bin := filepath.Join(o.out, "build", p.os+"_"+p.arch, "mesh-verify")
		if p.os == "windows" {
			bin += ".exe"
		}
		if err := buildBinary(ctx, src, bin, p, o.version); err != nil {
			return nil, err
		}
		base := fmt.Sprintf("mesh-verify_%s_%s_%s", o.version, p.os, p.arch)
		archive := filepath.Join(o.out, base+".tar.gz")
		if err := writeArchive(archive, bin, extra, o.epoch); err != nil {
			return nil, err
		}
		sbom := filepath.Join(o.out, base+".sbom.cdx.json")
		if err := writeSBOM(sbom, bin, o.version, p, o.epoch); err != nil {
			return nil, err
		}
		for _, f := range []string{archive, sbom} {
			sum, err := sha256File(f)
			if err != nil {
				return nil, err
			}
			sums = append(sums, checksum{sum, filepath.Base(f)})
			arts = append(arts, f)
		}
		krewPlatforms = append(krewPlatforms, krewPlatform{p: p, archive: filepath.Base(archive), sha256: sums[len(sums)-2].sum,
			bin: filepath.Base(bin)})
	}
	sumsPath := filepath.Join(o.out, "checksums.txt")
	if err := writeChecksums(sumsPath, sums); err != nil {
		return nil, err
	}
	arts = append(arts, sumsPath)
	manifest := filepath.Join(o.out, krewPluginName+".yaml")
	if err := writeKrewManifest(manifest, o.repo, o.version, krewPlatforms); err != nil {
		return nil, err
	}
	return append(arts, manifest), nil
}

// buildBinary is `make build` for one platform, stripped (-s -w: no
// symbol table or DWARF; panics still print file:line) with the version
// kept in main.version.
func buildBinary(ctx context.Context, src, out string, p platform, version string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version,
		"-o", out, "./cmd/mesh-verify")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch, "GOFLAGS=-mod=readonly", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = os.Stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", p, err, stderr.Bytes())
	}
	return nil
}

// writeArchive writes a gzip'd tar of the binary and the extra files with
// fixed owners, modes and times, and no gzip name or time, so the same
// inputs give the same bytes (and the same checksum in krew's index).
func writeArchive(path, bin string, extra map[string][]byte, mtime time.Time) error {
	b, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	type entry struct {
		name string
		mode int64
		data []byte
	}
	entries := []entry{{filepath.Base(bin), 0o755, b}, {"LICENSE", 0o644, extra["LICENSE"]}, {"README.md", 0o644, extra["README.md"]}}
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: mtime, Typeflag: tar.TypeReg,
			Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("archive %s: %s: %w", path, e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("archive %s: %s: %w", path, e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

type checksum struct{ sum, name string }

func sha256File(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// writeChecksums writes sha256sum's format ("<hex>  <name>"), so that
// `sha256sum -c checksums.txt` checks a download.
func writeChecksums(path string, sums []checksum) error {
	var b strings.Builder
	for _, s := range sums {
		fmt.Fprintf(&b, "%s  %s\n", s.sum, s.name)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
