package runner

import (
	"slices"
	"testing"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// metrics.via's values are the ways portforward.ScrapeVia knows.
func TestMetricsViaValuesAreKubes(t *testing.T) {
	for _, v := range []string{scenarios.MetricsViaProxy, scenarios.MetricsViaPortForward, scenarios.DefaultMetricsVia} {
		if !slices.Contains(kube.Vias(), v) {
			t.Errorf("scenario metrics.via %q is not one of kube.Vias() %v", v, kube.Vias())
		}
	}
}
