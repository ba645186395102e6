package scenarios

import (
	"encoding/json"
	"flag"
	"reflect"
	"testing"

	invopop "github.com/invopop/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/internal/schematest"
)

var update = flag.Bool("update", false, "rewrite scenario.schema.json from the Go types instead of comparing it with them")

const schemaFile = "scenario.schema.json"

// TestScenarioSchema generates the schema of scenario files from the Go
// types and fails when the committed scenario.schema.json (what JSONSchema
// returns) differs; -update rewrites the file (`make schema`).
func TestScenarioSchema(t *testing.T) {
	t.Parallel()
	schematest.Golden(t, schemaFile, JSONSchema(), generateScenarioSchema(t), *update, "the scenario's Go types")
}

// Patterns of the value types' text, as values.go parses it. They are
// hints for editors and may let through what the loader refuses; they
// must not refuse what it reads.
const (
	number       = `([0-9]+(\.[0-9]*)?|\.[0-9]+)`
	durationUnit = `(ns|us|µs|μs|ms|s|m|h)`
	goDuration   = `(` + number + durationUnit + `)+`
)

// valueTypes are the types that decode themselves (yaml.Unmarshaler in
// values.go), with what they read, as $defs of the schema. A type that
// decodes itself and is not here fails the generator.
func valueTypes() map[reflect.Type]*invopop.Schema {
	text := func(pattern string) *invopop.Schema { return &invopop.Schema{Type: "string", Pattern: pattern} }
	return map[reflect.Type]*invopop.Schema{
		reflect.TypeFor[Rate](): {
			Description: `A rate: a whole number of requests per period, like "200/s", "50/100ms" or "1000/1m", or a bare whole number per second.`,
			AnyOf: []*invopop.Schema{
				text(`^\s*\+?[0-9]+\s*(/\s*(\+?` + goDuration + `|` + durationUnit + `))?\s*$`),
				{Type: "integer", Minimum: "1"},
			},
			Examples: []any{"200/s", "50/100ms", "1000/1m"},
		},
		reflect.TypeFor[Duration](): {
			Description: `A duration with its unit, like "10s", "1m30s" or "250ms" (units ns, us, ms, s, m, h); a bare number other than 0 is refused.`,
			AnyOf: []*invopop.Schema{
				text(`^\s*\+?(0|` + goDuration + `)\s*$`),
				{Type: "integer", Enum: []any{0}},
			},
			Examples: []any{"10s", "1m30s", "250ms"},
		},
		reflect.TypeFor[Size](): {
			Description: `A size in bytes: a number, or one with a unit like "64KiB" or "10kB" (KiB, MiB, GiB, TiB are powers of 1024; kB, MB, GB, TB of 1000).`,
			AnyOf: []*invopop.Schema{
				text(`^\s*\+?` + number + `\s*(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*$`),
				{Type: "integer", Minimum: "0"},
			},
			Examples: []any{"64KiB", "1MiB", 512},
		},
		reflect.TypeFor[Percent](): {
			Description: `A share: a percentage like "5%", or a fraction in [0, 1] like 0.05 (a bare number above 1 is refused as ambiguous).`,
			AnyOf: []*invopop.Schema{
				text(`^\s*\+?` + number + `([eE][-+]?[0-9]+)?\s*%?\s*$`),
				{Type: "number", Minimum: "0", Maximum: "1"},
			},
			Examples: []any{"5%", 0.05},
		},
		reflect.TypeFor[StatusRange](): {
			Description: `An HTTP status: a code like 200, a class like "2xx" or a range like "200-299", within 100..599.`,
			AnyOf: []*invopop.Schema{
				text(`^\s*([1-5][0-9][0-9]|[1-5]xx|[1-5]XX|[1-5][0-9][0-9]\s*-\s*[1-5][0-9][0-9])\s*$`),
				{Type: "integer", Minimum: "100", Maximum: "599"},
			},
			Examples: []any{200, "2xx", "200-299"},
		},
	}
}

// required lists, per type, the fields the loader always requires
// (validate.go, observe.go); requirements that depend on other fields are
// left to it.
func required() map[reflect.Type][]string {
	return map[reflect.Type][]string{
		reflect.TypeFor[Scenario]():      {"apiVersion", "kind", "metadata", "target", "expect"},
		reflect.TypeFor[Metadata]():      {"name"},
		reflect.TypeFor[Cluster]():       {"name"},
		reflect.TypeFor[Forward]():       {"cluster", "resource", "port"},
		reflect.TypeFor[Workload]():      {"name", "selector"},
		reflect.TypeFor[MetricsSource](): {"port", "counter"},
		reflect.TypeFor[MirrorExpect]():  {"to", "percent"},
	}
}

// enums lists, per type and field, the only values the loader accepts.
func enums() map[reflect.Type]map[string][]string {
	return map[reflect.Type]map[string][]string{
		reflect.TypeFor[Forward]():       {"scheme": {"http", "https"}},
		reflect.TypeFor[Attribution]():   {"preset": PresetNames()},
		reflect.TypeFor[Rule]():          {"field": IdentityFields(), "match": {"first", "last"}},
		reflect.TypeFor[LogSource]():     {"preset": LogPresetNames()},
		reflect.TypeFor[MetricsSource](): {"via": {MetricsViaProxy, MetricsViaPortForward}},
		reflect.TypeFor[Statistics](): {
			"interval":     {"wilson", "clopper-pearson"},
			"inconclusive": {"fail", "pass"},
			"stop":         {"end", "early"},
			"balancing":    Balancings(),
		},
		reflect.TypeFor[Split]():      {"by": Dimensions(), "model": SplitModels(), "source": Sources(), "balancing": Balancings()},
		reflect.TypeFor[BucketSet]():  {"by": Dimensions(), "source": Sources()},
		reflect.TypeFor[WorkerPod]():  {"sidecar": {SidecarIstio, SidecarKuma, SidecarNone}},
		reflect.TypeFor[Toleration](): {"operator": {"Equal", "Exists"}, "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"}},
	}
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// generateScenarioSchema reflects Scenario into a JSON Schema with
// invopop/jsonschema by its yaml tags, with the value types of values.go,
// text fields that also take numbers (the decoder reads any scalar into a
// string: port: 8080), and the loader's unconditional requirements and
// fixed choices.
func generateScenarioSchema(t *testing.T) []byte {
	t.Helper()
	values := valueTypes()
	used := map[reflect.Type]bool{}
	var unknown []reflect.Type
	r := &invopop.Reflector{
		Anonymous:                  true,
		ExpandedStruct:             true,
		FieldNameTag:               "yaml",
		RequiredFromJSONSchemaTags: true, // nothing is required by its tag; see required
		Mapper: func(t reflect.Type) *invopop.Schema {
			if _, ok := values[t]; ok {
				used[t] = true
				return &invopop.Schema{Ref: "#/$defs/" + t.Name()}
			}
			if reflect.PointerTo(t).Implements(unmarshalerType) {
				unknown = append(unknown, t)
				return nil
			}
			switch t.Kind() {
			case reflect.String:
				return &invopop.Schema{Extras: map[string]any{"type": []string{"string", "number"}}}
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				return &invopop.Schema{Type: "integer", Minimum: "0"}
			}
			return nil
		},
	}
	base := reflect.TypeFor[Scenario]().PkgPath()
	if err := r.AddGoComments(base, "."); err != nil {
		t.Fatalf("doc comments of %s: %v", base, err)
	}
	for k, c := range r.CommentMap {
		r.CommentMap[k] = schematest.Unwrap(c)
	}
	s := r.Reflect(&Scenario{})
	for _, typ := range unknown {
		t.Errorf("%s decodes itself (UnmarshalYAML): add what it reads to valueTypes", typ)
	}
	for typ := range used {
		s.Definitions[typ.Name()] = values[typ]
	}
	def := func(typ reflect.Type) *invopop.Schema {
		d := s
		if typ != reflect.TypeFor[Scenario]() {
			d = s.Definitions[typ.Name()]
		}
		if d == nil || d.Properties == nil {
			t.Fatalf("no schema of %s among the generated definitions", typ)
		}
		return d
	}
	prop := func(typ reflect.Type, name string) *invopop.Schema {
		p, ok := def(typ).Properties.Get(name)
		if !ok {
			t.Fatalf("%s has no field %q in the schema", typ, name)
		}
		return p
	}
	for typ, names := range required() {
		for _, n := range names {
			prop(typ, n) // it exists
		}
		def(typ).Required = names
	}
	for typ, fields := range enums() {
		for name, values := range fields {
			p := prop(typ, name)
			p.Type, p.Extras, p.Enum = "string", nil, nil
			for _, v := range values {
				p.Enum = append(p.Enum, v)
			}
		}
	}
	scenario := reflect.TypeFor[Scenario]()
	for name, value := range map[string]string{"apiVersion": APIVersion, "kind": Kind} {
		p := prop(scenario, name)
		p.Type, p.Extras, p.Const = "string", nil, value
	}
	one := uint64(1)
	prop(scenario, "expect").MinItems = &one
	s.Title = "mesh-verify scenario"
	s.Description = "A mesh-verify scenario file, apiVersion " + APIVersion + " (docs/report-format.md)."
	s.Comments = "Generated from the Go types in scenarios/types.go by `make schema`; do not edit."
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatalf("marshal the scenario schema: %v", err)
	}
	return append(b, '\n')
}
