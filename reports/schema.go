package reports

import _ "embed"

// schema is report.schema.json, generated from Report by TestReportSchema
// (`make schema`); a string, so the embedded copy cannot be changed.
//
//go:embed report.schema.json
var schema string

// JSONSchema returns the JSON Schema (draft 2020-12) of report.json in the
// format Schema names (docs/report-format.md).
func JSONSchema() []byte { return []byte(schema) }
