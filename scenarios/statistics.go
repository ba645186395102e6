package scenarios

import "slices"

// Statistics are the defaults every expectation inherits.
type Statistics struct {
	Confidence float64 `yaml:"confidence"`
	Power      float64 `yaml:"power"`
	// Margin is absolute percentage points ("5%" or 0.05) unless Relative.
	Margin   Percent `yaml:"margin"`
	Relative bool    `yaml:"relative"`
	// Interval is clopper-pearson (default) or wilson.
	Interval string `yaml:"interval"`
	// Inconclusive says how a gate treats INCONCLUSIVE: fail (default) or pass.
	Inconclusive string `yaml:"inconclusive"`
	// Stop is "end" (default) or "early" for sequential looks.
	Stop  string `yaml:"stop"`
	Looks int    `yaml:"looks"`
	// Balancing says how the mesh's entry picks a backend, which decides
	// what one independent draw is (docs/statistics.md §3): "request"
	// (per request: Envoy, weighted clusters) or "connection" (every
	// request on a keep-alive connection goes where the connection went:
	// Skupper, L4). ApplyDefaults resolves it: connection when a cluster
	// declares a cost or a split uses a link-cost model, else request.
	Balancing string `yaml:"balancing"`
	// BalancingReason says why Balancing has its value, for the report.
	BalancingReason string `yaml:"-"`
}

func (s *Scenario) checkStatistics(c *checker) {
	st := s.Statistics
	if !(st.Confidence > 0.5 && st.Confidence < 1) {
		c.add("statistics.confidence", "want a level in (0.5, 1), like 0.95, got %v", st.Confidence)
	}
	if !(st.Power > 0 && st.Power < 1) {
		c.add("statistics.power", "want a probability in (0, 1), like 0.8, got %v", st.Power)
	}
	if !(st.Margin > 0 && st.Margin <= 0.5) {
		c.add("statistics.margin", "want a margin in (0, 50%%], like 5%%, got %s", st.Margin)
	}
	if st.Interval != "wilson" && st.Interval != "clopper-pearson" {
		c.add("statistics.interval", "want wilson or clopper-pearson, got %q", st.Interval)
	}
	if st.Inconclusive != "fail" && st.Inconclusive != "pass" {
		c.add("statistics.inconclusive", "want fail or pass (how a gate treats INCONCLUSIVE), got %q", st.Inconclusive)
	}
	checkBalancing(c, "statistics.balancing", st.Balancing)
	switch st.Stop {
	case "early":
		if st.Looks < 2 || st.Looks > 20 {
			c.add("statistics.looks", "want 2..20 interim looks, got %d", st.Looks)
		}
	case "end":
		if st.Looks != 0 {
			c.add("statistics.looks", "looks applies only with stop: early")
		}
	default:
		c.add("statistics.stop", "want end or early, got %q", st.Stop)
	}
}

// Balancings are the sampling units statistics.balancing may name.
func Balancings() []string { return []string{BalancingRequest, BalancingConnection} }

func checkBalancing(c *checker, path, b string) {
	if b != "" && !slices.Contains(Balancings(), b) {
		c.add(path, "want request (the mesh picks a backend per request) or connection (per keep-alive connection), got %q", b)
	}
}
