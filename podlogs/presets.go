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
	// Direction is the side of a proxy's access log the preset counts
	// (inbound: requests the pod received; outbound: requests it sent),
	// "" for an app's log. Opposite matches the other side's lines of the
	// same format, and OnlyOpposite says what to change in the mesh when
	// the pods log only those: a mesh that logs one side only (Kuma's
	// TrafficLog, a MeshAccessLog with only to:, Istio's Telemetry
	// match.mode) then gets a configuration error naming it, not an
	// empty count.
	Direction, Opposite, OnlyOpposite string
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

// kumaHead is Kuma's default HTTP access-log format up to the source
// service (docs/real-apps.md); kumaInbound is an inbound line's tail.
const (
	kumaHead    = `^\[[^\]]+\] \S+ "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" (?P<status>\d+) .*?"[^"]*" "[^"]*" "[^"]*" "(?P<request_id>[^"]*)" "(?P<authority>[^"]*)" `
	kumaInbound = `"unknown" "[^"]*" "[^"]*" "[^"]*"$`
)

// What to change when a proxy logs only the other side of its traffic.
const (
	istioOnlyClient = "Istio logs only the client side of these pods: a Telemetry resource selecting them sets accessLogging[].match.mode CLIENT. Set mode CLIENT_AND_SERVER (or SERVER) there, or observe the calling workload with logs.preset istio-proxy-outbound"
	istioOnlyServer = "Istio logs only the server side of these pods: a Telemetry resource selecting them sets accessLogging[].match.mode SERVER. Set mode CLIENT_AND_SERVER (or CLIENT) there, or observe the serving workload with logs.preset istio-proxy"
	kumaOnlyTo      = "Kuma logs only outbound traffic here, as a legacy TrafficLog does and a MeshAccessLog with only spec.to: add a spec.from entry (targetRef kind Mesh, default.backends as in spec.to) to the MeshAccessLog whose spec.targetRef selects these pods (Kuma 2.x; the next major release removes MeshAccessLog spec.from and TrafficLog: there observe the calling workload with logs.preset kuma-sidecar-outbound)"
	kumaOnlyFrom    = "Kuma logs only inbound traffic here, as a MeshAccessLog with only spec.from does: add a spec.to entry to the MeshAccessLog whose spec.targetRef selects these pods, or observe the serving workload with logs.preset kuma-sidecar"
)

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
		"istio-proxy": {Match: envoyHead + `inbound\|`, Container: "istio-proxy",
			Direction: "inbound", Opposite: envoyHead + `outbound\|`, OnlyOpposite: istioOnlyClient},
		// The requests a sidecar (a caller's, a gateway's) sent: the upstream
		// host is the pod that served them, found by its IP in the inventory.
		"istio-proxy-outbound": {Match: envoyHead + `outbound\|`, Container: "istio-proxy",
			Direction: "outbound", Opposite: envoyHead + `inbound\|`, OnlyOpposite: istioOnlyServer},
		// Kuma's default access log (MeshAccessLog or TrafficLog to a file):
		// inbound lines have the source service "unknown".
		"kuma-sidecar": {Match: kumaHead + `"unknown" "[^"]*" "[^"]*" "(?P<upstream>[^"]*)"$`, Container: "kuma-sidecar",
			Direction: "inbound", Opposite: kumaHead + `"[^"]*" "[^"]*" "[^"]*" "[^"]*"$`, OnlyOpposite: kumaOnlyTo},
		// The requests a Kuma sidecar sent (any source service but
		// "unknown"): the upstream host is the endpoint that served them.
		"kuma-sidecar-outbound": {Match: kumaHead + `"[^"]*" "[^"]*" "[^"]*" "(?P<upstream>[^"]*)"$`, Exclude: kumaInbound,
			Container: "kuma-sidecar", Direction: "outbound", Opposite: kumaHead + `"unknown" "[^"]*" "[^"]*" "[^"]*"$`, OnlyOpposite: kumaOnlyFrom},
		// Envoy's JSON access log (Istio accessLogEncoding JSON, Kuma
		// MeshAccessLog format type Json with the documented HTTP keys):
		// the requests the sidecar received, and those it sent.
		"envoy-json": {Match: envoyJSONInbound, Direction: "inbound", Opposite: envoyJSONOutbound,
			OnlyOpposite: istioOnlyClient + "; " + kumaOnlyTo},
		"envoy-json-outbound": {Match: envoyJSONOutbound, Exclude: `"kuma_source_service":\s*"unknown"`, Direction: "outbound",
			Opposite: envoyJSONInbound, OnlyOpposite: istioOnlyServer + "; " + kumaOnlyFrom},
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
