package scenarios

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestBuiltins(t *testing.T) {
	t.Parallel()
	names := BuiltinNames()
	if !slices.Contains(names, "url-split") {
		t.Fatalf("BuiltinNames() = %v, want url-split among them", names)
	}
	for _, name := range names {
		s, err := Builtin(name)
		if err != nil {
			t.Errorf("built-in %s: %v", name, err)
			continue
		}
		if s.File != "" || s.Metadata.Name != name {
			t.Errorf("built-in %s: File %q, name %q (the name must match the file)", name, s.File, s.Metadata.Name)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("built-in %s: Validate: %v", name, err)
		}
		src, err := BuiltinSource(name)
		if want, _ := os.ReadFile("catalog/" + name + ".yaml"); err != nil || !bytes.Equal(src, want) {
			t.Errorf("BuiltinSource(%s) = %d bytes, %v; want catalog/%s.yaml as shipped (%d bytes)", name, len(src), err, name, len(want))
		}
	}
	s, _ := Builtin("url-split")
	if s.Target.URL != "http://127.0.0.1:8080/" || s.Attribution.Preset != "tutorial" ||
		s.Expect[0].Split.Model != "weights" || len(s.Clusters) != 2 {
		t.Errorf("url-split = %+v", s)
	}
	// Each call parses afresh, so one caller's change does not leak.
	s.Clusters[0].Name = "changed"
	if again, _ := Builtin("url-split"); again.Clusters[0].Name != "c1" {
		t.Error("Builtin returned shared state")
	}
	for _, bad := range []string{"nope", "../catalog/url-split", ""} {
		if _, err := Builtin(bad); err == nil || !strings.Contains(err.Error(), "url-split") {
			t.Errorf("Builtin(%q) = %v, want an error listing the built-ins", bad, err)
		}
		if _, err := BuiltinSource(bad); err == nil || !strings.Contains(err.Error(), "url-split") {
			t.Errorf("BuiltinSource(%q) = %v, want an error listing the built-ins", bad, err)
		}
	}
}

// TestValidateInCode covers scenarios built in Go: errors name the field
// but carry no position.
func TestValidateInCode(t *testing.T) {
	t.Parallel()
	s := &Scenario{
		APIVersion:  APIVersion,
		Kind:        Kind,
		Metadata:    Metadata{Name: "code"},
		Clusters:    []Cluster{{Name: "c1"}, {Name: "c2"}},
		Target:      Target{URL: "http://127.0.0.1:8080/"},
		Attack:      Attack{Rate: &Rate{Freq: 10, Per: 1e9}, Requests: 100},
		Attribution: Attribution{Preset: "tutorial"},
		Expect:      []Expectation{{Split: &Split{Weights: map[string]float64{"c1": 1, "c2": 1}}}},
	}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "statistics.confidence") {
		t.Fatalf("Validate before defaults = %v, want statistics errors", err)
	}
	s.ApplyDefaults()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	s.Expect[0].Split.Weights["c7"] = 1
	err := s.Validate()
	if err == nil || err.Error() != "expect[0].split.weights.c7: unknown cluster c7 (declared: c1, c2)" {
		t.Fatalf("Validate = %v", err)
	}
}
