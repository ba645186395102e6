package envoylog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// JSON formats: Envoy's json_format output as the meshes configure it.
const (
	// IstioJSON is meshConfig accessLogEncoding JSON: the keys of Istio's
	// EnvoyJSONLogFormatIstio (pilot/pkg/model/telemetry_logging.go, Istio
	// 1.9 and later), values typed as recent Envoys write them (numbers
	// for codes, sizes and the duration; null for a missing value).
	IstioJSON = "istio-json"
	// KumaJSON is a MeshAccessLog backend with format type Json and the
	// HTTP keys Kuma's docs list (kuma-website meshaccesslog.md; the
	// docs' method value has a stray quote, left out here).
	KumaJSON = "kuma-json"
)

// jsonValue is a string, or null for "" as Envoy writes a missing value.
func jsonValue(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jsonMS(d time.Duration) any {
	if d < 0 {
		return nil
	}
	return d.Milliseconds()
}

// jsonLine is one JSON object; encoding/json sorts the keys, and Envoy's
// order is no contract either.
func jsonLine(format string, e Entry) (string, error) {
	m := map[string]any{
		"start_time": e.Start.UTC().Format(TimeLayout), "method": jsonValue(e.Method), "path": jsonValue(e.Path),
		"protocol": jsonValue(e.Protocol), "response_code": e.Code, "response_flags": dash(e.Flags),
		"bytes_received": e.BytesIn, "bytes_sent": e.BytesOut, "x_forwarded_for": jsonValue(e.XFF),
		"user_agent": jsonValue(e.UserAgent), "request_id": jsonValue(e.RequestID), "authority": jsonValue(e.Authority),
		"upstream_host": jsonValue(e.UpstreamHost),
	}
	// %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% is a header: a string.
	m["upstream_service_time"] = nil
	if e.Upstream >= 0 {
		m["upstream_service_time"] = strconv.FormatInt(e.Upstream.Milliseconds(), 10)
	}
	switch format {
	case IstioJSON:
		m["duration"] = jsonMS(e.Duration)
		m["response_code_details"] = jsonValue(e.Details)
		m["connection_termination_details"] = nil
		m["upstream_transport_failure_reason"] = nil
		m["upstream_cluster"] = jsonValue(e.UpstreamCluster)
		m["upstream_local_address"] = jsonValue(e.UpstreamLocal)
		m["downstream_local_address"] = jsonValue(e.DownstreamLocal)
		m["downstream_remote_address"] = jsonValue(e.DownstreamRemote)
		m["requested_server_name"] = jsonValue(e.SNI)
		m["route_name"] = jsonValue(e.Route)
	case KumaJSON:
		m["duration_ms"] = jsonMS(e.Duration)
		m["kuma_mesh"] = jsonValue(e.Mesh)
		m["kuma_source_service"] = jsonValue(e.SourceService)
		m["kuma_destination_service"] = jsonValue(e.DestService)
		m["kuma_source_address_without_port"] = jsonValue(e.SourceAddress)
	default:
		return "", fmt.Errorf("access-log format %q is no JSON format", format)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode %s access-log line: %w", format, err)
	}
	return string(b), nil
}

// parseJSON reads a JSON access-log line back into an Entry.
func parseJSON(format, line string) (Entry, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(line)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return Entry{}, fmt.Errorf("%s access-log line %q: not a JSON object: %v", format, line, err)
	}
	str := func(k string) string {
		s, _ := m[k].(string)
		if s == "-" {
			return ""
		}
		return s
	}
	var errs []error
	num := func(k string) int64 {
		switch v := m[k].(type) {
		case json.Number:
			n, err := v.Int64()
			if err != nil {
				errs = append(errs, fmt.Errorf("key %s: %w", k, err))
			}
			return n
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("key %s: %w", k, err))
			}
			return n
		case nil:
			return -1
		}
		errs = append(errs, fmt.Errorf("key %s: want a number, got %T", k, m[k]))
		return 0
	}
	ms := func(k string) time.Duration {
		n := num(k)
		if n < 0 {
			return -1
		}
		return time.Duration(n) * time.Millisecond
	}
	start, err := time.Parse(TimeLayout, str("start_time"))
	if err != nil {
		errs = append(errs, fmt.Errorf("key start_time: %w", err))
	}
	e := Entry{Start: start, Method: str("method"), Path: str("path"), Protocol: str("protocol"),
		Code: int(num("response_code")), Flags: str("response_flags"), BytesIn: num("bytes_received"), BytesOut: num("bytes_sent"),
		Upstream: ms("upstream_service_time"), XFF: str("x_forwarded_for"), UserAgent: str("user_agent"),
		RequestID: str("request_id"), Authority: str("authority"), UpstreamHost: str("upstream_host")}
	switch format {
	case IstioJSON:
		e.Duration = ms("duration")
		e.Details, e.UpstreamCluster, e.UpstreamLocal = str("response_code_details"), str("upstream_cluster"), str("upstream_local_address")
		e.DownstreamLocal, e.DownstreamRemote = str("downstream_local_address"), str("downstream_remote_address")
		e.SNI, e.Route = str("requested_server_name"), str("route_name")
	case KumaJSON:
		e.Duration = ms("duration_ms")
		e.Mesh, e.SourceService = str("kuma_mesh"), str("kuma_source_service")
		e.DestService, e.SourceAddress = str("kuma_destination_service"), str("kuma_source_address_without_port")
	}
	if len(errs) > 0 {
		return Entry{}, fmt.Errorf("%s access-log line %q: %w", format, line, errs[0])
	}
	return e, nil
}
