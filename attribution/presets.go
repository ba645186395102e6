package attribution

import (
	"fmt"
	"regexp"
	"sort"
)

// preset builders return fresh rules so callers may not share mutable state.
func presets() map[string]func() []Rule {
	return map[string]func() []Rule{
		// The tutorials' Spring apps answer "I'm callme-service v2"; a caller
		// embeds its callee's answer after its own, and the callee is the
		// hop the mesh routed, hence the last match.
		"tutorial": func() []Rule {
			return []Rule{{Source: Body, Last: true,
				Regex: regexp.MustCompile(`I'm (?P<service>[A-Za-z0-9._-]+) (?P<version>v[A-Za-z0-9._-]*)`)}}
		},
		// Istio's echo app prints key=value lines, prefixed with [n] when it
		// forwarded the call; the first block is the workload that answered.
		"istio-echo": func() []Rule {
			return []Rule{
				{Source: Body, Regex: regexp.MustCompile(`(?m)(?:^|\s)Hostname=(?P<pod>\S+)`)},
				{Source: Body, Regex: regexp.MustCompile(`(?m)(?:^|\s)Cluster=(?P<cluster>\S+)`)},
				{Source: Body, Regex: regexp.MustCompile(`(?m)(?:^|\s)ServiceVersion=(?P<version>\S+)`)},
			}
		},
		// Kuma's test-server echo answers JSON whose "instance" is the pod.
		"kuma-test-server": func() []Rule {
			return []Rule{{Source: JSON, Key: "instance", Field: Pod}}
		},
		// Cilium's rebel-base demo answers {"Galaxy": …, "Cluster": "Cluster-1"}.
		"cilium-rebel-base": func() []Rule {
			return []Rule{{Source: JSON, Key: "Cluster", Field: Cluster}}
		},
	}
}

// PresetNames lists the ready-made rule sets.
func PresetNames() []string {
	var names []string
	for n := range presets() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the rules of a ready-made rule set.
func Preset(name string) ([]Rule, error) {
	p, ok := presets()[name]
	if !ok {
		return nil, fmt.Errorf("unknown attribution preset %q (known: %v)", name, PresetNames())
	}
	return p(), nil
}
