//go:build tools

// Package tools pins the vegeta CLI the benchmark compares against to the
// same module version mesh-verify embeds as a library.
package tools

import _ "github.com/tsenart/vegeta/v12"
