package attribution

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// echoLine anchors a key of Istio's echo app: one "Key=value" per line,
// prefixed "[0] " or "[0 body] " when a forwarding echo client printed
// its callee's answer (README.md, attribution on unmodified apps: presets).
func echoLine(key, group string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^(?:\[[0-9]+(?: body)?\] )?` + key + `=(?P<` + group + `>[^\r\n]*)$`)
}

// presets returns fresh rules per call so callers never share mutable
// state. Every regex here is tested against bodies the real apps answer
// (attribution/testdata/README.md cites them).
func presets() map[string]func() []Rule {
	return map[string]func() []Rule{
		// The tutorials' Spring apps answer "I'm callme-service v2"; a caller
		// embeds its callee's answer after its own, and the callee is the
		// hop the mesh routed, hence the last match. callme's
		// /ping-with-random-error answers 504 "Surprise <uuid> v1", which
		// names the version of a failure.
		"tutorial": func() []Rule {
			return []Rule{
				// /ping-with-random-error's success glues the JVM's
				// instance UUID to the name ("I'm callme-service<uuid>
				// v1"): the UUID is no part of the service.
				{Name: "preset tutorial (I'm …)", Source: Body, Last: true,
					Regex: regexp.MustCompile(`I'm (?P<service>[A-Za-z0-9._-]+?)(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})? (?P<version>v[A-Za-z0-9._-]*[A-Za-z0-9_-])`)},
				{Name: "preset tutorial (Surprise …)", Source: Body,
					Regex: regexp.MustCompile(`^Surprise \S+ (?P<version>v\S*)`)},
			}
		},
		// Istio's echo app: Hostname is the pod; Cluster is printed only
		// when the app was started with --cluster (Istio ≥ 1.19), or empty
		// (up to 1.18): the inventory then names the pod's cluster.
		"istio-echo": func() []Rule {
			return []Rule{
				{Name: "preset istio-echo (Hostname=)", Source: Body, Regex: echoLine("Hostname", "pod")},
				{Name: "preset istio-echo (Cluster=)", Source: Body, Regex: echoLine("Cluster", "cluster")},
				{Name: "preset istio-echo (ServiceVersion=)", Source: Body, Regex: echoLine("ServiceVersion", "version")},
			}
		},
		// Istio's helloworld answers "Hello version: v2, instance:
		// helloworld-v2-<hash>-<id>": the instance is the pod (HOSTNAME).
		"istio-helloworld": func() []Rule {
			return []Rule{{Name: "preset istio-helloworld", Source: Body,
				Regex: regexp.MustCompile(`Hello version: (?P<version>[^,\s]*), instance: (?P<pod>\S*)`)}}
		},
		// Kuma's test-server echo answers JSON whose only identity is
		// "instance", the pod name: the inventory names its cluster.
		"kuma-test-server": func() []Rule {
			return []Rule{{Name: "preset kuma-test-server (instance)", Source: JSON, Key: "instance", Field: Pod}}
		},
		// Cilium's rebel-base answers {"Galaxy": …, "Cluster": "Cluster-1"}:
		// its own cluster names, which attribution.map renames to the
		// scenario's ({from: cluster, to: cluster, values: {Cluster-1: c1}}).
		"cilium-rebel-base": func() []Rule {
			return []Rule{{Name: "preset cilium-rebel-base (Cluster)", Source: JSON, Key: "Cluster", Field: Cluster}}
		},
	}
}

// PresetNames lists the ready-made rule sets.
func PresetNames() []string {
	return slices.Sorted(maps.Keys(presets()))
}

// Preset returns the rules of a ready-made rule set.
func Preset(name string) ([]Rule, error) {
	p, ok := presets()[name]
	if !ok {
		return nil, fmt.Errorf("unknown attribution preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p(), nil
}
