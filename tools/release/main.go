// Command release builds mesh-verify's release artifacts from a checkout,
// the way a tagged release publishes them (README.md, "Install"):
//
//   - a static binary per platform (linux and darwin, amd64 and arm64;
//     CGO_ENABLED=0, -trimpath, symbols stripped, the version stamped as
//     `make build` stamps it);
//   - one tar.gz archive per platform holding the binary, LICENSE and
//     README.md, byte for byte reproducible for the same source and
//     SOURCE_DATE_EPOCH;
//   - a CycloneDX SBOM per binary, read from the module list Go records
//     in the binary itself (what is linked, not what go.mod lists);
//   - checksums.txt (sha256sum's format) over the archives and SBOMs;
//   - the krew plugin manifest mesh-verify.yaml pointing at the archives
//     of the GitHub release, with their checksums.
//
// It is the project's equivalent of a GoReleaser configuration, kept as a
// small program in a module of its own (like tools/image and tools/lab) so
// that a fresh clone can produce and test every artifact offline, and the
// product module does not depend on it. The container image is built from
// the same linux binaries by tools/image (`make release` runs both).
//
//	go run . -version v1.2.3 -src ../.. -out ../../dist
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
)

func main() {
	var o options
	var platforms string
	flag.StringVar(&o.version, "version", "", "the release version, a semantic version with a leading v (v1.2.3, v0.3.0-rc.1)")
	flag.StringVar(&o.src, "src", "../..", "the repository checkout to build")
	flag.StringVar(&o.out, "out", "../../dist", "directory to write the artifacts to (replaced)")
	flag.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "comma-separated GOOS/GOARCH pairs to build")
	flag.StringVar(&o.repo, "repo", "mesh-verify/mesh-verify", "GitHub owner/name the release is published under (the krew manifest's download URLs)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	var err error
	if o.platforms, err = parsePlatforms(platforms); err != nil {
		fail(err)
	}
	if o.epoch, err = sourceDateEpoch(); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	arts, err := release(ctx, o)
	if err != nil {
		fail(err)
	}
	for _, a := range arts {
		fmt.Println(a)
	}
}

func fail(err error) {
	var ue usageError
	fmt.Fprintln(os.Stderr, "release:", err)
	if errors.As(err, &ue) {
		os.Exit(2)
	}
	os.Exit(1)
}

// usageError is a bad flag value (exit 2, as flag's own errors).
type usageError struct{ error }
