package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/internal/schematest"
)

// TestScenarioSchemaFollowsTheDecoder walks the fields of Scenario as the
// decoder reads them (decoder.structure: exported fields by yaml tag) beside
// the properties of scenario.schema.json: every field must be a property
// and every property a field, and every object must refuse unknown
// properties as the loader refuses unknown fields.
func TestScenarioSchemaFollowsTheDecoder(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(JSONSchema(), &root); err != nil {
		t.Fatalf("read scenario.schema.json: %v", err)
	}
	defs, _ := root["$defs"].(map[string]any)
	resolve := func(node any) map[string]any {
		n, _ := node.(map[string]any)
		if ref, ok := n["$ref"].(string); ok {
			n, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		return n
	}
	scalar := map[reflect.Kind]string{
		reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int64: "integer",
		reflect.Uint64: "integer", reflect.Float64: "number",
	}
	var walk func(typ reflect.Type, node map[string]any, path string)
	walk = func(typ reflect.Type, node map[string]any, path string) {
		if node == nil {
			t.Errorf("%s: no schema for %s", path, typ)
			return
		}
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if reflect.PointerTo(typ).Implements(unmarshalerType) {
			if node["anyOf"] == nil {
				t.Errorf("%s: %s decodes itself from text or a number; its schema should offer both (anyOf), got %v", path, typ, node)
			}
			return
		}
		switch typ.Kind() {
		case reflect.Struct:
			if node["type"] != "object" || node["additionalProperties"] != false {
				t.Errorf("%s: want an object with additionalProperties false (the loader refuses unknown fields), got type %v, additionalProperties %v", path, node["type"], node["additionalProperties"])
			}
			props, _ := node["properties"].(map[string]any)
			var fields []string
			for i := range typ.NumField() {
				f := typ.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if !f.IsExported() || name == "-" || name == "" {
					continue
				}
				fields = append(fields, name)
				if _, ok := props[name]; !ok {
					t.Errorf("%s: field %s (%s.%s) is missing from scenario.schema.json", path, name, typ.Name(), f.Name)
					continue
				}
				walk(f.Type, resolve(props[name]), strings.TrimPrefix(path+"."+name, "."))
			}
			for name := range props {
				if !slices.Contains(fields, name) {
					t.Errorf("%s: scenario.schema.json has property %s, which the loader does not read (%s)", path, name, typ)
				}
			}
		case reflect.Slice:
			if node["type"] != "array" {
				t.Errorf("%s: want an array for %s, got %v", path, typ, node["type"])
			}
			walk(typ.Elem(), resolve(node["items"]), path+"[]")
		case reflect.Map:
			if node["type"] != "object" {
				t.Errorf("%s: want an object for %s, got %v", path, typ, node["type"])
			}
			walk(typ.Elem(), resolve(node["additionalProperties"]), path+".*")
		default:
			want, ok := scalar[typ.Kind()]
			if !ok {
				t.Errorf("%s: %s is a kind the decoder does not read", path, typ)
				return
			}
			if got := fmt.Sprint(node["type"]); !strings.Contains(got, want) {
				t.Errorf("%s: want type %s for %s, got %s", path, want, typ, got)
			}
		}
	}
	walk(reflect.TypeFor[Scenario](), root, "")
}

// validateYAML validates a scenario file as an editor does: the YAML read
// as JSON.
func validateYAML(s *jsonschema.Schema, data []byte) error {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("read YAML: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("YAML as JSON: %w", err)
	}
	return schematest.Validate(s, b)
}

// Every built-in scenario and every valid fixture matches the schema.
func TestScenarioSchemaAcceptsValidFiles(t *testing.T) {
	t.Parallel()
	s, err := schematest.Compile(schemaFile, JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range BuiltinNames() {
		data, err := catalog.ReadFile("catalog/" + name + ".yaml")
		if err != nil {
			t.Fatalf("built-in %s: %v", name, err)
		}
		files["catalog/"+name+".yaml"] = data
	}
	good, _ := filepath.Glob("testdata/good/*.yaml")
	for _, f := range good {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
	}
	if len(files) < 10 {
		t.Fatalf("want the built-ins and the good fixtures, got %d files", len(files))
	}
	for name, data := range files {
		if err := validateYAML(s, data); err != nil {
			t.Errorf("%s is a valid scenario, but scenario.schema.json rejects it: %v", name, err)
		}
	}
}

// Mistakes the loader refuses for a field's name or type are refused by
// the schema too, which names the field.
func TestScenarioSchemaRejectsMistakes(t *testing.T) {
	t.Parallel()
	s, err := schematest.Compile(schemaFile, JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile("testdata/good/open-loop-rate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type mistake struct {
		name  string
		data  []byte
		field string // the last name of the field the validator must name
	}
	var cases []mistake
	for _, c := range []struct{ name, old, new, field string }{
		{"a misspelt field", "\nattack:\n", "\natack:\n", "atack"},
		{"a misspelt nested field", "  duration: 1m30s\n", "  durration: 1m30s\n", "durration"},
		{"text for a number", "  requests: 20000\n", "  requests: many\n", "requests"},
		{"a rate without a unit it knows", "  rate: 50/100ms\n", "  rate: 50/fortnight\n", "rate"},
		{"an unknown model", "      by: version\n", "      by: version\n      model: fair\n", "model"},
	} {
		data := strings.Replace(string(base), c.old, c.new, 1)
		if data == string(base) {
			t.Fatalf("%s: %q is not in the base scenario", c.name, c.old)
		}
		cases = append(cases, mistake{c.name, []byte(data), c.field})
	}
	clusters := regexp.MustCompile(`(?s)\nclusters:\n.*?\ntarget:`).ReplaceAllString(string(base), "\nclusters: c1\ntarget:")
	cases = append(cases, mistake{"a string for a list", []byte(clusters), "clusters"})
	for _, c := range cases {
		if _, err := Parse("mistake.yaml", c.data); err == nil {
			t.Fatalf("%s: the loader accepts it, so it is no mistake", c.name)
		}
	}
	// The fixtures of mistakes of a field's name, type or text.
	for _, f := range []string{
		"wrong-type-int", "wrong-type-list", "unknown-field", "unknown-top-level-field",
		"bad-duration-no-unit", "negative-duration", "bad-percent-ambiguous", "bad-size-unit", "bad-rate",
		"bad-success-codes", "wrong-apiversion", "wrong-kind", "not-a-mapping",
		"bad-model", "bad-by", "bad-interval", "bad-balancing", "bad-match", "unknown-preset",
	} {
		file := "testdata/bad/" + f + ".yaml"
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		field := parseWants(t, file, data)[0].field
		field = field[strings.LastIndex(field, ".")+1:]
		field, _, _ = strings.Cut(field, "[")
		cases = append(cases, mistake{file, data, field})
	}
	for _, c := range cases {
		err := validateYAML(s, c.data)
		if err == nil {
			t.Errorf("%s: scenario.schema.json accepts it", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: scenario.schema.json rejects it without naming %s: %v", c.name, c.field, err)
		}
	}
}

// Each built-in scenario names the schema for yaml-language-server on its
// first line.
func TestCatalogNamesTheSchema(t *testing.T) {
	t.Parallel()
	const modeline = "# yaml-language-server: $schema=../scenario.schema.json\n"
	for _, name := range BuiltinNames() {
		data, err := catalog.ReadFile("catalog/" + name + ".yaml")
		if err != nil {
			t.Fatalf("built-in %s: %v", name, err)
		}
		if !bytes.HasPrefix(data, []byte(modeline)) {
			t.Errorf("catalog/%s.yaml does not start with %q", name, modeline)
		}
	}
}
