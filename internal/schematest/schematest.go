// Package schematest holds what the tests of the published JSON Schemas
// (report.schema.json, scenario.schema.json; docs/report-format.md) share:
// comparing a committed schema with the one the Go types generate,
// compiling an embedded schema and validating documents with a maintained
// validator (santhosh-tekuri/jsonschema).
package schematest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Golden fails t when committed, the schema file as shipped, is not what
// the Go types generate; with update it rewrites file instead (`make
// schema`). what names the types for the message.
func Golden(t testing.TB, file string, committed, generated []byte, update bool, what string) {
	t.Helper()
	if update {
		if err := os.WriteFile(file, generated, 0o644); err != nil {
			t.Fatalf("update %s: %v", file, err)
		}
		return
	}
	if diff := FirstDifference(committed, generated); diff != "" {
		t.Fatalf("%s is not what %s generate (%s): run `make schema` and commit the file", file, what, diff)
	}
}

// FirstDifference describes the first line where the committed and the
// generated file differ, or returns "" when they are equal.
func FirstDifference(committed, generated []byte) string {
	if bytes.Equal(committed, generated) {
		return ""
	}
	c, g := strings.Split(string(committed), "\n"), strings.Split(string(generated), "\n")
	line := func(lines []string, i int) string {
		if i < len(lines) {
			return fmt.Sprintf("%q", strings.TrimSpace(lines[i]))
		}
		return "end of file"
	}
	for i := range max(len(c), len(g)) {
		if i >= len(c) || i >= len(g) || c[i] != g[i] {
			return fmt.Sprintf("line %d: committed %s, generated %s", i+1, line(c, i), line(g, i))
		}
	}
	return "they differ"
}

// Compile compiles a schema document, asserting formats (date-time) as a
// strict reader would.
func Compile(name string, schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(name, doc); err != nil {
		return nil, fmt.Errorf("add %s: %w", name, err)
	}
	s, err := c.Compile(name)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	return s, nil
}

// Validate validates a JSON document.
func Validate(s *jsonschema.Schema, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("read JSON: %w", err)
	}
	return s.Validate(v)
}

// Unwrap joins the lines of each paragraph of a doc comment: a schema's
// description is shown re-flowed, not as the source wraps it.
func Unwrap(comment string) string {
	paras := strings.Split(comment, "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paras, "\n\n")
}
