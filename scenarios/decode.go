package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
)

// Load reads, decodes, defaults and validates the scenario at path. The
// error, if any, is Errors: every problem found, each with file:line:field.
func Load(path string) (*Scenario, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, Errors{{File: path, Msg: fmt.Sprintf("cannot read scenario: %v", err), err: err}}
	}
	return Parse(path, data)
}

// MaxFileSize bounds a scenario file. The largest catalog scenario is a
// few KiB; a megabyte is thousands of expectations. A larger file, or one
// that is not a regular file (`validate /dev/zero`, a FIFO), is refused
// before it is read (internal/boundedfile), so it can neither block nor
// fill memory.
const MaxFileSize = 1 << 20

// ReadFile reads a scenario file: a regular file of at most MaxFileSize
// bytes.
func ReadFile(path string) ([]byte, error) {
	return boundedfile.Read(path, MaxFileSize, "a scenario file")
}

// Parse is Load for data already in memory; file names it in messages.
//
// The document is decoded by walking yaml.v3's node tree rather than with
// yaml.Decoder.KnownFields: the decoder stops at the first error of a custom
// type and reports only "line N" with Go type names, while the walk knows
// the dotted path and column of every value and keeps going, so a user sees
// every problem of the file at once.
func Parse(file string, data []byte) (*Scenario, error) {
	root, errs := parseDocument(file, data)
	if root == nil {
		return nil, errOrNil(errs)
	}
	return parseRoot(file, root)
}

// parseRoot decodes, defaults and validates a scenario's root mapping.
func parseRoot(file string, root *yaml.Node) (*Scenario, error) {
	var errs Errors
	d := &decoder{file: file, pos: positions{"": {val: root}}}
	s := &Scenario{}
	d.value(root, reflect.ValueOf(s).Elem(), "")
	errs = append(errs, d.errs...)

	is := explicitZeros(s, d.pos)
	zeros := map[string]bool{}
	for _, i := range is {
		zeros[i.path] = true
	}
	s.ApplyDefaults()
	for _, i := range s.check() {
		if !zeros[i.path] {
			is = append(is, i)
		}
	}
	for _, i := range is {
		if d.failedNear(i.path) || slices.ContainsFunc(i.deps, d.failedNear) {
			// A value that failed to decode was left zero; complaints about
			// it (or its parent) being missing would only repeat the cause.
			continue
		}
		errs = append(errs, d.pos.fieldError(file, i))
	}
	if len(errs) > 0 {
		return nil, errOrNil(errs)
	}
	s.File = file
	return s, nil
}

// parseDocument returns the root mapping of the single YAML document in
// data. Several documents are refused: a second scenario in the same file
// would otherwise be silently ignored.
func parseDocument(file string, data []byte) (*yaml.Node, Errors) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || err == nil && (len(doc.Content) == 0 || isNull(doc.Content[0])) {
		return nil, Errors{{File: file, Line: 1, Column: 1, Msg: "empty scenario: want a mapping with apiVersion, kind, metadata, target, attack, attribution and expect"}}
	}
	if err != nil {
		return nil, Errors{syntaxError(file, data, err)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, Errors{syntaxError(file, data, err)}
	default:
		return nil, Errors{{File: file, Line: next.Line, Column: next.Column,
			Msg: "a second YAML document (after ---): a scenario file holds exactly one scenario"}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, Errors{{File: file, Line: root.Line, Column: root.Column,
			Msg: "want a mapping with apiVersion, kind, metadata, target, attack, attribution and expect, got " + describe(root)}}
	}
	return root, nil
}

// syntaxError turns yaml.v3's "yaml: line N: problem" into a FieldError.
func syntaxError(file string, data []byte, err error) *FieldError {
	m := regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`).FindStringSubmatch(err.Error())
	if m == nil {
		return &FieldError{File: file, Msg: "invalid YAML: " + err.Error(), err: err}
	}
	line, _ := strconv.Atoi(m[1])
	if line == 0 {
		// yaml.v3 gives no line for these: find it in the text.
		if l, c := locateProblem(data, m[2]); l > 0 {
			return &FieldError{File: file, Line: l, Column: c, Msg: "invalid YAML: " + m[2], err: err}
		}
	}
	// yaml.v3 (through v3.0.6) prints the 0-based line of the mark for
	// parser errors and the 1-based one for scanner errors; the parser's
	// problems are the "did not find expected ..." family and directive
	// errors.
	if strings.HasPrefix(m[2], "did not find expected") || strings.HasPrefix(m[2], "found duplicate %") ||
		strings.HasPrefix(m[2], "found incompatible YAML document") || strings.HasPrefix(m[2], "found undefined tag handle") {
		line++
	}
	return &FieldError{File: file, Line: line, Msg: "invalid YAML: " + m[2], err: err}
}

// locateProblem finds the line and column of the yaml.v3 errors that
// carry none: an undefined alias, a control character, invalid UTF-8.
func locateProblem(data []byte, problem string) (line, col int) {
	at := -1
	switch {
	case strings.HasPrefix(problem, "unknown anchor '"):
		name, _, _ := strings.Cut(strings.TrimPrefix(problem, "unknown anchor '"), "'")
		for i := 0; at < 0 && i < len(data); {
			j := bytes.Index(data[i:], []byte("*"+name))
			if j < 0 {
				break
			}
			end := i + j + 1 + len(name)
			if end == len(data) || !isAnchorChar(data[end]) {
				at = i + j
			}
			i += j + 1
		}
	case strings.Contains(problem, "control characters"):
		at = bytes.IndexFunc(data, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f })
	case strings.Contains(problem, "UTF-8"), strings.Contains(problem, "UTF-16"):
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				at = i
				break
			}
			i += size
		}
	}
	if at < 0 {
		return 0, 0
	}
	line = 1 + bytes.Count(data[:at], []byte("\n"))
	col = 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:at], '\n')+1:at])
	return line, col
}

// isAnchorChar reports whether b can continue an anchor name.
func isAnchorChar(b byte) bool {
	return b != ' ' && b != '\t' && b != '\n' && b != '\r' && b != ',' && b != ']' && b != '}' && b != '['
}

// loc is where a field sits: its key (nil for list items) and its value.
type loc struct{ key, val *yaml.Node }

// positions maps dotted field paths to their place in the file.
type positions map[string]loc

// issue is a validation problem before it is given a position.
type issue struct {
	path string
	msg  string
	// atKey points at the mapping key rather than the value, for problems
	// with the key itself (an unknown cluster used as a weights key).
	atKey bool
	// deps are other fields the problem follows from; when one of them
	// failed to decode, the problem is not reported (it was left zero).
	deps []string
}

// fieldError positions an issue. A field that is absent (a required one
// left out) is reported at its nearest present ancestor.
func (p positions) fieldError(file string, i issue) *FieldError {
	e := &FieldError{File: file, Field: i.path, Msg: i.msg}
	for path := i.path; ; path = parentPath(path) {
		if l, ok := p[path]; ok {
			n := l.val
			if l.key != nil && (i.atKey || path != i.path || n == nil || n.Kind != yaml.ScalarNode) {
				n = l.key
			}
			if n != nil {
				e.Line, e.Column = n.Line, n.Column
			}
			return e
		}
		if path == "" {
			return e
		}
	}
}

// parentPath drops the last element of a dotted path: a.b[2] → a.b,
// a.b → a, a["x.y"] → a.
func parentPath(p string) string {
	if strings.HasSuffix(p, `"]`) {
		if i := strings.LastIndex(p, `["`); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// joinKey appends a mapping key to a path, quoting keys that would make
// the path ambiguous (dots, brackets, spaces).
func joinKey(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '-' || r == '_' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// maxNodes bounds the work of expanding aliases, which can otherwise make
// a small file decode into an enormous one.
const maxNodes = 1 << 20

type decoder struct {
	file   string
	errs   Errors
	pos    positions
	failed []string // paths that did not decode
	nodes  int
}

func (d *decoder) fail(n *yaml.Node, path, msg string) {
	// A mapping or list of the wrong kind starts on the line after its
	// key; the key is where the reader looks.
	if l, ok := d.pos[path]; ok && l.key != nil && n.Kind != yaml.ScalarNode {
		n = l.key
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Column: n.Column, Field: path, Msg: msg})
	d.failed = append(d.failed, path)
}

// failedNear reports whether path is, contains or lies inside a path that
// failed to decode.
func (d *decoder) failedNear(path string) bool {
	for _, f := range d.failed {
		if within(f, path) || within(path, f) {
			return true
		}
	}
	return false
}

// within reports whether p is inner or lies below it.
func within(p, inner string) bool {
	if !strings.HasPrefix(p, inner) {
		return false
	}
	rest := p[len(inner):]
	return rest == "" || inner == "" || rest[0] == '.' || rest[0] == '['
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// value decodes n into v, recording positions and errors under path.
func (d *decoder) value(at *yaml.Node, v reflect.Value, path string) {
	// Content comes from the anchor, but problems are reported where the
	// alias is used: that is the line that is wrong in this context.
	n := at
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.nodes++; d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.fail(at, path, "document too large: aliases expand to more than a million values")
		}
		return
	}
	if isNull(n) {
		// "rate:" with nothing after it means the field is not set.
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(at, v.Elem(), path)
		return
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(n); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				d.fail(at, path, fe.Msg)
			} else {
				d.fail(at, path, err.Error())
			}
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structure(n, at, v, path)
	case reflect.Map:
		d.mapping(n, at, v, path)
	case reflect.Slice:
		d.list(n, at, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(at, path, "want a string, got "+describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		// yaml.v3 truncates a float into an integer field (2.7 → 2):
		// whole-number fields take integers only.
		if k := v.Kind(); (k == reflect.Int || k == reflect.Int64 || k == reflect.Uint64) && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!int" {
			d.fail(at, path, "want "+wantScalar(k)+", got "+describe(n))
			return
		}
		tmp := reflect.New(v.Type())
		if n.Kind != yaml.ScalarNode || n.Decode(tmp.Interface()) != nil {
			d.fail(at, path, "want "+wantScalar(v.Kind())+", got "+describe(n))
			return
		}
		v.Set(tmp.Elem())
	default:
		d.fail(at, path, fmt.Sprintf("internal error: cannot decode into %s", v.Type()))
	}
}

func wantScalar(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Uint64:
		return "a whole number ≥ 0"
	}
	return "a number"
}

// pair is one key/value entry of a mapping node.
type pair struct{ key, val *yaml.Node }

// pairs returns a mapping's entries with merge keys (<<: *base) expanded;
// keys written out win over merged ones. Duplicate keys written out are
// errors: yaml.v3 rejects them too, and the second would silently win.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var own, merged []pair
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, path)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "want a plain key, got "+describe(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, joinKey(path, k.Value), fmt.Sprintf("duplicate key %q (first set at line %d)", k.Value, first.Line))
			continue
		}
		seen[k.Value] = k
		own = append(own, pair{k, v})
	}
	for _, p := range merged {
		if _, ok := seen[p.key.Value]; !ok {
			seen[p.key.Value] = p.key
			own = append(own, p)
		}
	}
	return own
}

func (d *decoder) mergePairs(v *yaml.Node, path string) []pair {
	at := v
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	// Merges of merges expand like nested aliases (eleven levels of
	// `<<: [*prev, ×10]` are 10^11 pairs in 1 KiB): every merge counts
	// against the same bound as values.
	if d.nodes++; d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.fail(at, path, "document too large: merge keys (<<) and aliases expand to more than a million values")
		}
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		return d.pairs(v, path)
	case yaml.SequenceNode:
		var out []pair
		for _, m := range v.Content {
			out = append(out, d.mergePairs(m, path)...)
		}
		return out
	}
	d.fail(v, path, "merge (<<) wants a mapping or a list of mappings, got "+describe(v))
	return nil
}

func (d *decoder) structure(n, at *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	names := make([]string, 0, t.NumField())
	index := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	if n.Kind != yaml.MappingNode {
		d.fail(at, path, fmt.Sprintf("want a mapping with %s, got %s", strings.Join(names, ", "), describe(n)))
		return
	}
	for _, p := range d.pairs(n, path) {
		child := joinKey(path, p.key.Value)
		i, ok := index[p.key.Value]
		if !ok {
			msg, guess := unknownField(p.key.Value, names)
			d.fail(p.key, child, msg)
			if guess != "" {
				// The field meant is as good as missing: do not also
				// report what its absence implies.
				d.failed = append(d.failed, joinKey(path, guess))
			}
			continue
		}
		d.pos[child] = loc(p)
		d.value(p.val, v.Field(i), child)
	}
}

func (d *decoder) mapping(n, at *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(at, path, "want a mapping of name: value, got "+describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, p := range d.pairs(n, path) {
		child := joinKey(path, p.key.Value)
		d.pos[child] = loc(p)
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(p.val, elem, child)
		v.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(v.Type().Key()), elem)
	}
}

func (d *decoder) list(n, at *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(at, path, "want a list, got "+describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		child := joinIndex(path, i)
		d.pos[child] = loc{val: item}
		d.value(item, out.Index(i), child)
	}
	v.Set(out)
}

// unknownField suggests the closest allowed name when the key looks like a
// typo of it, else lists what is allowed.
func unknownField(key string, allowed []string) (msg, guess string) {
	best, bestDist := "", 3
	for _, a := range allowed {
		dist := editDistance(strings.ToLower(key), strings.ToLower(a))
		if dist < bestDist {
			best, bestDist = a, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field, did you mean %q?", best), best
	}
	sorted := append([]string(nil), allowed...)
	sort.Strings(sorted)
	return "unknown field; allowed: " + strings.Join(sorted, ", "), ""
}

// editDistance is the Levenshtein distance, used only for typo hints.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
