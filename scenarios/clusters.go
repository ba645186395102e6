package scenarios

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Cluster maps a bucket name used in expectations to a kubeconfig context.
// Context is optional while the target is a plain URL.
type Cluster struct {
	Name    string `yaml:"name"`
	Context string `yaml:"context"`
	// Cost is the link cost from the entry cluster (Skupper); 0 = local.
	Cost *float64 `yaml:"cost"`
}

func isDNSName(s string) bool {
	return len(s) <= 253 && regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`).MatchString(s)
}

func (s *Scenario) checkClusters(c *checker) {
	seen := map[string]int{}
	for i, cl := range s.Clusters {
		p := joinIndex("clusters", i)
		switch {
		case cl.Name == "":
			c.add(p+".name", "required: the bucket name expectations use, like c1")
		case !regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`).MatchString(cl.Name):
			c.add(p+".name", "invalid cluster name %q: want letters, digits, '-', '_' and '.'", cl.Name)
		default:
			if j, dup := seen[cl.Name]; dup {
				c.add(p+".name", "duplicate cluster %q (also clusters[%d])", cl.Name, j)
			} else {
				seen[cl.Name] = i
			}
		}
		if cl.Cost != nil && !(*cl.Cost >= 0 && !math.IsInf(*cl.Cost, 1)) {
			c.add(p+".cost", "want a link cost ≥ 0 (0 = local), got %v", *cl.Cost)
		}
	}
}

// declared reports whether name is a declared cluster.
func (s *Scenario) declared(name string) bool {
	return slices.Contains(s.ClusterNames(), name)
}

func (s *Scenario) unknownCluster(name string) string {
	return fmt.Sprintf("unknown cluster %s (declared: %s)", name, strings.Join(s.ClusterNames(), ", "))
}

func declaredList(s *Scenario) string {
	if len(s.Clusters) == 0 {
		return "none declared: add clusters"
	}
	return "declared: " + strings.Join(s.ClusterNames(), ", ")
}
