package reports_test

import (
	"encoding"
	"encoding/json"
	"flag"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	invopop "github.com/invopop/jsonschema"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/internal/schematest"
	"github.com/mesh-verify/mesh-verify/reports"
)

var update = flag.Bool("update", false, "rewrite report.schema.json from the Go types instead of comparing it with them")

const schemaFile = "report.schema.json"

// TestReportSchema generates the schema of report.json from the Go types and
// fails when the committed report.schema.json (what reports.JSONSchema
// returns) differs; -update rewrites the file (`make schema`).
func TestReportSchema(t *testing.T) {
	schematest.Golden(t, schemaFile, reports.JSONSchema(), generateReportSchema(t), *update, "the report's Go types")
}

// jsonTypes are the types whose JSON is not what their Go kind suggests, as
// $defs of the schema: a type that marshals itself and is not here fails
// the generator, so a new one is noticed.
func jsonTypes() map[reflect.Type]*invopop.Schema {
	var verdicts []any
	for _, v := range []assert.Verdict{assert.Pass, assert.Inconclusive, assert.Fail} {
		verdicts = append(verdicts, v.String())
	}
	return map[reflect.Type]*invopop.Schema{
		reflect.TypeFor[assert.Verdict](): {Type: "string", Enum: verdicts,
			Description: "A verdict: PASS, INCONCLUSIVE or FAIL (docs/statistics.md)."},
		reflect.TypeFor[time.Duration](): {Type: "integer",
			Description: "A duration in nanoseconds."},
		reflect.TypeFor[time.Time](): {Type: "string", Format: "date-time",
			Description: "A time in RFC 3339 format."},
	}
}

// generateReportSchema reflects reports.Report into a JSON Schema with
// invopop/jsonschema, then makes it say what encoding/json really writes:
// the types of jsonTypes, null for a nil slice, map or pointer that is not
// omitempty, and the fields of an embedded pointer as optional.
func generateReportSchema(t *testing.T) []byte {
	t.Helper()
	root := reflect.TypeFor[reports.Report]()
	special := jsonTypes()
	structs := reachableStructs(t, root, special)
	used := map[reflect.Type]bool{}
	r := &invopop.Reflector{
		Anonymous:      true,
		ExpandedStruct: true,
		// Readers ignore fields they do not know: adding an optional field
		// keeps the format's version (docs/report-format.md).
		AllowAdditionalProperties: true,
		Mapper: func(t reflect.Type) *invopop.Schema {
			if _, ok := special[t]; ok {
				used[t] = true
				return &invopop.Schema{Ref: "#/$defs/" + t.Name()}
			}
			switch t.Kind() {
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				return &invopop.Schema{Type: "integer", Minimum: "0"}
			}
			return nil
		},
	}
	addComments(t, r, root, structs)
	s := r.ReflectFromType(root)
	for typ := range used {
		s.Definitions[typ.Name()] = special[typ]
	}
	for _, typ := range structs {
		def := s
		if typ != root {
			def = s.Definitions[typ.Name()]
		}
		if def == nil || def.Properties == nil {
			t.Fatalf("no schema of %s among the generated definitions", typ)
		}
		matchEncodingJSON(t, def, typ)
	}
	schemaProp, _ := s.Properties.Get("schema")
	schemaProp.Const = reports.Schema
	s.Title = "mesh-verify report"
	s.Description = "report.json of a mesh-verify run, format " + reports.Schema + " (docs/report-format.md)."
	s.Comments = "Generated from the Go types in reports/report.go by `make schema`; do not edit."
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatalf("marshal the report schema: %v", err)
	}
	return append(b, '\n')
}

// jsonField is one property encoding/json writes for a struct.
type jsonField struct {
	name string
	typ  reflect.Type
	// omitEmpty is set for omitempty and omitzero fields; optional also for
	// the fields of an embedded pointer, absent while it is nil.
	omitEmpty, optional bool
}

// jsonFields lists the properties encoding/json writes for struct type t,
// those of embedded structs promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			et, ptr := f.Type, f.Type.Kind() == reflect.Pointer
			if ptr {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for _, ef := range jsonFields(et) {
					ef.optional = ef.optional || ptr
					out = append(out, ef)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := strings.Split(opts, ",")
		omit := slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero")
		out = append(out, jsonField{name: name, typ: f.Type, omitEmpty: omit, optional: omit})
	}
	return out
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// reachableStructs returns the struct types the report is made of, root
// first, each of which becomes one definition of the schema. It fails on a
// type that marshals itself but is not among special, on a map whose keys
// are not strings, and on two types of the same name (invopop names
// definitions by the bare type name).
func reachableStructs(t *testing.T, root reflect.Type, special map[reflect.Type]*invopop.Schema) []reflect.Type {
	t.Helper()
	names := map[string]reflect.Type{}
	for typ := range special {
		names[typ.Name()] = typ
	}
	var structs []reflect.Type
	var visit func(typ reflect.Type, at string)
	visit = func(typ reflect.Type, at string) {
		if _, ok := special[typ]; ok {
			return
		}
		for _, m := range []reflect.Type{jsonMarshaler, textMarshaler} {
			if typ.Implements(m) || reflect.PointerTo(typ).Implements(m) {
				t.Fatalf("%s (%s) implements %s: add the JSON it writes to jsonTypes", typ, at, m)
			}
		}
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			visit(typ.Elem(), at)
		case reflect.Map:
			if typ.Key().Kind() != reflect.String {
				t.Fatalf("%s (%s): map keys other than strings are not described by the generator", typ, at)
			}
			visit(typ.Elem(), at)
		case reflect.Struct:
			if prev, ok := names[typ.Name()]; ok {
				if prev != typ {
					t.Fatalf("%s (%s) and %s share a name, which the schema's definitions are keyed by", typ, at, prev)
				}
				return
			}
			names[typ.Name()] = typ
			structs = append(structs, typ)
			for _, f := range jsonFields(typ) {
				visit(f.typ, typ.Name()+"."+f.name)
			}
		}
	}
	visit(root, root.Name())
	return structs
}

// addComments makes the doc comments of the report's types and fields
// (in this module) the descriptions of the schema.
func addComments(t *testing.T, r *invopop.Reflector, root reflect.Type, structs []reflect.Type) {
	t.Helper()
	// The test runs in root's package directory: AddGoComments names the
	// packages it parses by joining base and their path from here.
	base := root.PkgPath()
	module := path.Dir(base)
	var dirs []string
	for _, typ := range structs {
		if p := typ.PkgPath(); strings.HasPrefix(p, module+"/") && !slices.Contains(dirs, p) {
			dirs = append(dirs, p)
		}
	}
	for _, p := range dirs {
		rel, err := filepath.Rel(base, p)
		if err != nil {
			t.Fatalf("doc comments of %s: %v", p, err)
		}
		if err := r.AddGoComments(base, rel); err != nil {
			t.Fatalf("doc comments of %s: %v", p, err)
		}
	}
	for k, c := range r.CommentMap {
		r.CommentMap[k] = schematest.Unwrap(c)
	}
}

// matchEncodingJSON corrects def, the schema invopop made of struct type
// typ, where it differs from what encoding/json writes: a nil slice, map or
// pointer without omitempty is written as null, and the fields of an
// embedded pointer are left out while it is nil.
func matchEncodingJSON(t *testing.T, def *invopop.Schema, typ reflect.Type) {
	t.Helper()
	fields := jsonFields(typ)
	if def.Properties.Len() != len(fields) {
		t.Fatalf("%s: the schema has %d properties, encoding/json writes %d fields", typ, def.Properties.Len(), len(fields))
	}
	for _, f := range fields {
		p, ok := def.Properties.Get(f.name)
		if !ok {
			t.Fatalf("%s: field %q is not a property of the schema", typ, f.name)
		}
		if f.optional {
			def.Required = slices.DeleteFunc(def.Required, func(n string) bool { return n == f.name })
		}
		switch f.typ.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer:
			if !f.omitEmpty {
				def.Properties.Set(f.name, &invopop.Schema{
					AnyOf:       []*invopop.Schema{p, {Type: "null"}},
					Description: p.Description,
				})
				p.Description = ""
			}
		}
	}
}
