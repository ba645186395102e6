package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// writeSBOM writes a CycloneDX (JSON, spec 1.6) bill of materials of one
// binary from the build information Go embeds in it: the main module and
// every module actually linked, each with its purl (pkg:golang/…), plus
// the Go toolchain and the build settings. Reading the binary rather than
// go.mod means a module that go.mod requires but the binary does not link
// (test-only, tools) is not claimed, and one a replace directive swapped in
// is named as it was built.
func writeSBOM(path, bin, version string, p platform, created time.Time) error {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("sbom: read the build info of %s: %w", bin, err)
	}
	purl := func(path, version string) string { return "pkg:golang/" + path + "@" + version }
	mainRef := purl(bi.Main.Path, version)
	props := []cdx.Property{{Name: "go:goos", Value: p.os}, {Name: "go:goarch", Value: p.arch}}
	for _, s := range bi.Settings {
		switch s.Key {
		case "CGO_ENABLED", "-trimpath", "-ldflags", "GOAMD64", "GOARM64":
			props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	components := []cdx.Component{{
		BOMRef: "pkg:golang/stdlib@" + bi.GoVersion, Type: cdx.ComponentTypeLibrary, Name: "stdlib",
		Version: bi.GoVersion, PackageURL: "pkg:golang/stdlib@" + bi.GoVersion,
	}}
	deps := []string{components[0].BOMRef}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		ref := purl(m.Path, m.Version)
		c := cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: ref}
		if m.Sum != "" {
			// h1: is Go's dirhash of the module's files (go.sum), not a
			// file digest, so it is a property, not a CycloneDX hash.
			c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: m.Sum}}
		}
		components = append(components, c)
		deps = append(deps, ref)
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.Format(time.RFC3339),
		Component: &cdx.Component{BOMRef: mainRef, Type: cdx.ComponentTypeApplication, Name: "mesh-verify",
			Version: version, PackageURL: mainRef},
		Properties: &props,
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: mainRef, Dependencies: &deps}}
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return fmt.Errorf("sbom %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
