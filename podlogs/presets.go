package podlogs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Preset is a ready-made log rule for the per-request line of a real app
// or proxy, in its default format. Every regex is tested against lines the
// real software writes (podlogs/testdata/README.md cites them).
type Preset struct {
	// Match is the rule's regex; Exclude drops lines it also matches.
	Match, Exclude string
	// Container is the container whose log it reads, for presets of a
	// sidecar; "" leaves the choice to the workload.
	Container string
}

// springController matches the line a Spring Boot controller logs per
// request with Boot's default console pattern, whatever the Boot version:
// "… INFO 1 --- [nio-8080-exec-1] p.p.s.c.controller.CallmeController      : msg"
// (Boot 3.2+ adds "[app-name] " before the thread). The logger column is
// padded to 40 characters and cut from the left, so the class name ends it.
func springController(class, msg string) string {
	return `\.` + class + ` *: ` + msg
}

// envoyInbound and envoyOutbound match Istio's TEXT access log (the
// default with accessLogFile /dev/stdout): the five quoted fields from
// X-FORWARDED-FOR to UPSTREAM_HOST, then the upstream cluster, whose name
// says whether the sidecar received the request or sent it.
const envoyHead = `^\[[^\]]+\] "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" (?P<status>\d+) .*?"[^"]*" "[^"]*" "(?P<request_id>[^"]*)" "(?P<authority>[^"]*)" "(?P<upstream>[^"]*)" `

func presetTable() map[string]Preset {
	return map[string]Preset{
		// piomin/sample-istio-services callme-service: "Ping: name=…,
		// version=…" per /callme/ping (also the random-delay and
		// random-error variants, the latter with its status).
		"spring-callme": {Match: springController("CallmeController",
			`Ping(?: with random (?:delay|error))?: (?:id=\d+, )?name=(?P<service>[^,]+), version=(?P<version>[^,\s]+)(?:, random=\d+, httpCode=(?P<status>\d{3}))?`)},
		// caller-service logs "Ping: …" and then "Calling: response=…" per
		// request; only the first counts.
		"spring-caller": {Match: springController("CallerController",
			`Ping(?: with random (?:delay|error))?: name=(?P<service>[^,]+), version=(?P<version>[^,\s]+)`)},
		// The Skupper tutorial's sample-spring-kotlin-microservice: "(7)
		// findById(1)" per request, before the lookup.
		"spring-persons": {Match: springController("PersonController", `\(\d+\) find(?:ById|ByAge|All|AllDelayed)\(`)},
		// An Istio sidecar's access log, the requests it received (inbound):
		// the pod served them. Copies of a mirror carry the primary's
		// x-request-id and, up to Istio 1.27, a "-shadow" authority.
		"istio-proxy": {Match: envoyHead + `inbound\|`, Container: "istio-proxy"},
		// The requests a sidecar (a caller's, a gateway's) sent: the upstream
		// host is the pod that served them, found by its IP in the inventory.
		"istio-proxy-outbound": {Match: envoyHead + `outbound\|`, Container: "istio-proxy"},
		// Kuma's default access log (MeshAccessLog or TrafficLog to a file):
		// inbound lines have the source service "unknown".
		"kuma-sidecar": {Match: `^\[[^\]]+\] \S+ "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" (?P<status>\d+) .*?"[^"]*" "[^"]*" "[^"]*" "(?P<request_id>[^"]*)" "(?P<authority>[^"]*)" "unknown" "[^"]*" "[^"]*" "(?P<upstream>[^"]*)"$`,
			Container: "kuma-sidecar"},
		// nginx's "main" log format (Cilium's rebel-base is nginx 1.15.8),
		// without the kubelet's probes, which rebel-base gets every second.
		"nginx": {Match: `^\S+ - \S+ \[[^\]]+\] "(?P<method>[A-Z]+) (?P<path>\S+)[^"]*" (?P<status>\d{3}) \d+ "[^"]*" "[^"]*"`,
			Exclude: `"kube-probe/[^"]*"`},
	}
}

// PresetNames lists the log presets.
func PresetNames() []string { return slices.Sorted(maps.Keys(presetTable())) }

// LookupPreset returns a log preset by name.
func LookupPreset(name string) (Preset, error) {
	p, ok := presetTable()[name]
	if !ok {
		return Preset{}, fmt.Errorf("unknown log preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}
