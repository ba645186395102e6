package scenarios

import _ "embed"

// schema is scenario.schema.json, generated from Scenario by
// TestScenarioSchema (`make schema`); a string, so the embedded copy cannot
// be changed.
//
//go:embed scenario.schema.json
var schema string

// JSONSchema returns the JSON Schema (draft 2020-12) of a scenario file of
// APIVersion, for editors and other tools (docs/report-format.md). The
// loader stays the judge: it also checks what a schema cannot, such as
// clusters named in expectations being declared.
func JSONSchema() []byte { return []byte(schema) }
