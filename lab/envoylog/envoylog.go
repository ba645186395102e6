// Package envoylog writes (and reads back) the access-log lines Envoy
// writes with the default formats of the meshes the lab plays: Istio's
// TEXT format and Kuma's default HTTP format (docs/real-apps.md, "Envoy
// access logs"). The lab's inbound sidecars (lab/sidecar) and its outbound
// data planes (lab/meshsim) share it, so a line looks the same whichever
// side of a hop wrote it.
package envoylog

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Formats of the access-log lines.
const (
	// Istio is Istio's EnvoyTextLogFormat (meshConfig.accessLogEncoding
	// TEXT, accessLogFormat empty), Istio 1.23 and later
	// (%UPSTREAM_CLUSTER_RAW%).
	Istio = "istio"
	// Kuma is Kuma's default MeshAccessLog / TrafficLog HTTP format, with
	// the %KUMA_*% values the control plane substitutes.
	Kuma = "kuma"
)

// Formats lists the known formats.
func Formats() []string { return []string{Istio, Kuma, IstioJSON, KumaJSON} }

// TimeLayout is Envoy's default %START_TIME% (UTC, milliseconds).
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Response flags and details Envoy writes for the outcomes the lab plays.
const (
	FlagNone                 = "-"
	FlagNoHealthyUpstream    = "UH"
	FlagUpstreamConnFailure  = "UF"
	FlagDownstreamDisconnect = "DC"
	FlagNoRoute              = "NR"

	DetailsViaUpstream          = "via_upstream"
	DetailsNoHealthyUpstream    = "no_healthy_upstream"
	DetailsConnectionFailure    = "upstream_reset_before_response_started{connection_failure}"
	DetailsDownstreamDisconnect = "downstream_remote_disconnect"
	DetailsRouteNotFound        = "route_not_found"
)

// Envoy's answers when it cannot serve a request itself.
const (
	// NoHealthyUpstream is the 503 body when a route has no ready endpoint.
	NoHealthyUpstream = "no healthy upstream"
	// UpstreamConnectError is the 503 body when the endpoint refused.
	UpstreamConnectError = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
)

// Entry is one request as Envoy's access log records it. Empty strings
// and negative durations are written as "-", as Envoy does for a value
// it does not have.
type Entry struct {
	Start     time.Time
	Method    string
	Path      string // X-ENVOY-ORIGINAL-PATH or :PATH, with the query
	Protocol  string // HTTP/1.1
	Code      int    // 0 when no response was sent (downstream disconnect)
	Flags     string // response flags, "-" for none
	Details   string // %RESPONSE_CODE_DETAILS% (Istio)
	BytesIn   int64  // %BYTES_RECEIVED%: the request body
	BytesOut  int64  // %BYTES_SENT%: the response body
	Duration  time.Duration
	Upstream  time.Duration // X-ENVOY-UPSTREAM-SERVICE-TIME; < 0 when there was no upstream answer
	XFF       string
	UserAgent string
	RequestID string
	Authority string
	// UpstreamHost is the endpoint the request went to ("127.0.0.1:8080").
	UpstreamHost string

	// Istio's extra fields.
	UpstreamCluster  string // inbound|8080|| or outbound|8080|v1|svc.ns.svc.cluster.local
	UpstreamLocal    string
	DownstreamLocal  string
	DownstreamRemote string
	SNI              string
	Route            string

	// Kuma's extra fields.
	Mesh          string
	TraceID       string // X-B3-TRACEID or X-DATADOG-TRACEID
	SourceService string
	DestService   string
	SourceAddress string // without port
}

// NewRequestID is what Envoy sets as x-request-id when a request has none:
// a random (version 4) UUID.
func NewRequestID() string { return uuid.NewString() }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func code(c int) string { return strconv.Itoa(c) }

// Format writes e as one line (without the newline) in the given format.
func Format(format string, e Entry) (string, error) {
	switch format {
	case Istio:
		return istioLine(e), nil
	case Kuma:
		return kumaLine(e), nil
	case IstioJSON, KumaJSON:
		return jsonLine(format, e)
	}
	return "", fmt.Errorf("access-log format %q: want %s", format, strings.Join(Formats(), ", "))
}

// istioLine is Istio's EnvoyTextLogFormat:
//
//	[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS%
//	%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% "%UPSTREAM_TRANSPORT_FAILURE_REASON%"
//	%BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%"
//	"%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW%
//	%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%
func istioLine(e Entry) string {
	var b strings.Builder
	b.Grow(320)
	b.WriteString("[" + e.Start.UTC().Format(TimeLayout) + "] ")
	b.WriteString(`"` + dash(e.Method) + " " + dash(e.Path) + " " + dash(e.Protocol) + `" `)
	b.WriteString(code(e.Code) + " " + dash(e.Flags) + " " + dash(e.Details) + ` - "-" `)
	b.WriteString(strconv.FormatInt(e.BytesIn, 10) + " " + strconv.FormatInt(e.BytesOut, 10) + " ")
	b.WriteString(ms(e.Duration) + " " + ms(e.Upstream) + " ")
	b.WriteString(`"` + dash(e.XFF) + `" "` + dash(e.UserAgent) + `" "` + dash(e.RequestID) + `" "` +
		dash(e.Authority) + `" "` + dash(e.UpstreamHost) + `" `)
	b.WriteString(dash(e.UpstreamCluster) + " " + dash(e.UpstreamLocal) + " " + dash(e.DownstreamLocal) + " " +
		dash(e.DownstreamRemote) + " " + dash(e.SNI) + " " + dash(e.Route))
	return b.String()
}

// kumaLine is Kuma's default HTTP access-log format:
//
//	[%START_TIME%] %KUMA_MESH% "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE%
//	%RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%
//	"%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-B3-TRACEID?X-DATADOG-TRACEID)%" "%REQ(X-REQUEST-ID)%"
//	"%REQ(:AUTHORITY)%" "%KUMA_SOURCE_SERVICE%" "%KUMA_DESTINATION_SERVICE%" "%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%"
//	"%UPSTREAM_HOST%"
func kumaLine(e Entry) string {
	var b strings.Builder
	b.Grow(280)
	b.WriteString("[" + e.Start.UTC().Format(TimeLayout) + "] " + dash(e.Mesh) + " ")
	b.WriteString(`"` + dash(e.Method) + " " + dash(e.Path) + " " + dash(e.Protocol) + `" `)
	b.WriteString(code(e.Code) + " " + dash(e.Flags) + " ")
	b.WriteString(strconv.FormatInt(e.BytesIn, 10) + " " + strconv.FormatInt(e.BytesOut, 10) + " ")
	b.WriteString(ms(e.Duration) + " " + ms(e.Upstream) + " ")
	b.WriteString(`"` + dash(e.XFF) + `" "` + dash(e.UserAgent) + `" "` + dash(e.TraceID) + `" "` + dash(e.RequestID) + `" "` +
		dash(e.Authority) + `" "` + dash(e.SourceService) + `" "` + dash(e.DestService) + `" "` +
		dash(e.SourceAddress) + `" "` + dash(e.UpstreamHost) + `"`)
	return b.String()
}
