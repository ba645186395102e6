package kwok

import (
	"errors"
	"path/filepath"

	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
)

// ExtractContext is what Start does once a cluster's context is renamed.
var ExtractContext = extractContext

// NotListeningIn names the ports of the components in a cluster's
// kwok.yaml (clusterDir) that nothing listens on.
func NotListeningIn(clusterDir string) ([]string, error) {
	b, err := boundedfile.Read(filepath.Join(clusterDir, "kwok.yaml"), maxKwokConfig, "a kwokctl configuration")
	if err != nil {
		return nil, err
	}
	ports, err := componentPorts(b)
	if err != nil {
		return nil, err
	}
	waiting, ok := notListening(ports)
	if !ok {
		return nil, errors.New("no /proc/net/tcp to read listeners from")
	}
	var names []string
	for _, p := range waiting {
		names = append(names, p.String())
	}
	return names, nil
}
