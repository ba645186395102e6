package podlogs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Envoy's JSON access log, the same keys in Istio's (meshConfig
// accessLogEncoding JSON: EnvoyJSONLogFormatIstio in
// pilot/pkg/model/telemetry_logging.go) and Kuma's (the HTTP keys its
// MeshAccessLog docs give for format type Json). The presets' regexes
// only pick the side; the fields come from decoding the object, whatever
// the order of its keys.
const (
	envoyJSONInbound  = `^\{.*(?:"upstream_cluster":\s*"inbound\||"kuma_source_service":\s*"unknown")`
	envoyJSONOutbound = `^\{.*(?:"upstream_cluster":\s*"outbound\||"kuma_source_service":)`
)

// jsonGroup is the rule group an Envoy JSON access-log key fills ("": none).
func jsonGroup(key string) string {
	switch key {
	case "method", "path", "authority", "request_id":
		return key
	case "response_code":
		return "status"
	case "upstream_host":
		return "upstream"
	case "upstream_request_attempt_count", "x_envoy_attempt_count":
		return "attempt"
	}
	return ""
}

// maxJSONDepth bounds the nesting jsonFields accepts: an access-log
// object is flat, and a deep one is not an access log.
const maxJSONDepth = 8

var errNotObject = errors.New("not a JSON object")

// jsonFields decodes one JSON access-log line into rule fields: strings
// as they are, numbers in their JSON text, null and "-" left out (Envoy
// writes null for a missing value in JSON, "-" in text). A line that is no
// single JSON object is an error.
func jsonFields(text string) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotObject, err)
	}
	if obj == nil {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: text after the object", errNotObject)
	}
	if depth(text) > maxJSONDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", errNotObject, maxJSONDepth)
	}
	out := map[string]string{}
	for k, raw := range obj {
		g := jsonGroup(k)
		if g == "" {
			continue
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		case bool:
			s = strconv.FormatBool(x)
		}
		if s != "" && s != "-" {
			out[g] = s
		}
	}
	return out, nil
}

// depth is the deepest nesting of brackets in text, outside strings.
func depth(text string) int {
	d, most, inString, escaped := 0, 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}
