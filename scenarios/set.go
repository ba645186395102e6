package scenarios

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/redact"
)

// Set is one --set PATH=VALUE override of a scenario (README.md, "CI
// gate"). It is applied to the YAML node tree before the strict decode, so
// the value is checked exactly like one written in the file, and every
// problem it causes is reported under the flag rather than a file line.
type Set struct {
	// Raw is the flag's argument as given, quoted in errors.
	Raw  string
	Path []PathElem
	// Value is the YAML scalar or flow value (5, 30s, [c1, c2], {a: 1});
	// empty leaves the field unset, so its default applies.
	Value string
}

// PathElem is one step of a --set path: a mapping key or a list index.
type PathElem struct {
	Key   string
	Index int // used when IsIndex
	// IsIndex marks a [N] step.
	IsIndex bool
}

// Limits of --set (README.md, "Limits"): a scenario's deepest field is a
// few keys down (expect[0].split.weights.c1), and a path or value beyond
// these is a mistake or an attack on the parser: a 16,000-segment path
// once took 8 s and 570 MiB to refuse.
const (
	MaxSetPathLen      = 512
	MaxSetPathSegments = 32
	MaxSetValueBytes   = 64 << 10
	MaxSets            = 256
)

// shown is the flag as errors quote it, a credential's value hidden.
func (s Set) shown() string { return redact.Set(s.Raw) }

// ParseSet parses "PATH=VALUE". PATH uses the field paths of the error
// messages: attack.rate, expect[0].split.tolerance, and ["a.b"] for a key
// with dots (joinKey).
func ParseSet(raw string) (Set, error) {
	p, v, ok := strings.Cut(raw, "=")
	if !ok {
		return Set{}, fmt.Errorf("--set %s: want PATH=VALUE (attack.rate=500/s)", redact.Set(truncated(raw)))
	}
	switch {
	case len(p) > MaxSetPathLen:
		return Set{}, fmt.Errorf("--set %s: the path is %d bytes, more than %d", redact.Set(truncated(raw)), len(p), MaxSetPathLen)
	case len(v) > MaxSetValueBytes:
		return Set{}, fmt.Errorf("--set %s: the value is %d bytes, more than %d (put it in the scenario file)", redact.Set(truncated(p+"=")), len(v), MaxSetValueBytes)
	}
	path, err := ParsePath(p)
	if err != nil {
		return Set{}, fmt.Errorf("--set %s: %w", redact.Set(raw), err)
	}
	return Set{Raw: raw, Path: path, Value: v}, nil
}

// truncated keeps an error's quote of a --set argument readable.
func truncated(raw string) string {
	const show = 80
	if len(raw) <= show {
		return raw
	}
	return raw[:show] + "…"
}

// ParseSets parses every --set argument, in order.
func ParseSets(raws []string) ([]Set, error) {
	if len(raws) > MaxSets {
		return nil, fmt.Errorf("--set given %d times, more than %d: put the overrides in the scenario file", len(raws), MaxSets)
	}
	out := make([]Set, 0, len(raws))
	for _, r := range raws {
		s, err := ParseSet(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ParsePath parses a field path: keys joined by dots, [N] list indices,
// ["quoted"] keys. It is the inverse of FormatPath.
func ParsePath(p string) ([]PathElem, error) {
	if p == "" {
		return nil, fmt.Errorf("empty path")
	}
	var out []PathElem
	i := 0
	for i < len(p) {
		if len(out) >= MaxSetPathSegments {
			return nil, fmt.Errorf("path of more than %d keys and indices: no scenario field is that deep", MaxSetPathSegments)
		}
		switch {
		case p[i] == '[':
			if i+1 < len(p) && p[i+1] == '"' {
				q, err := strconv.QuotedPrefix(p[i+1:])
				if err != nil {
					return nil, fmt.Errorf("path %q: unterminated quoted key at offset %d", p, i)
				}
				key, _ := strconv.Unquote(q)
				end := i + 1 + len(q)
				if end >= len(p) || p[end] != ']' {
					return nil, fmt.Errorf("path %q: want ] after the quoted key at offset %d", p, end)
				}
				out = append(out, PathElem{Key: key})
				i = end + 1
				break
			}
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unterminated [ at offset %d", p, i)
			}
			num := p[i+1 : i+end]
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 || num != strconv.Itoa(n) {
				return nil, fmt.Errorf("path %q: list index %q is not a whole number ≥ 0", p, num)
			}
			out = append(out, PathElem{Index: n, IsIndex: true})
			i += end + 1
		case p[i] == '.':
			if len(out) == 0 || i+1 >= len(p) || p[i+1] == '.' || p[i+1] == '[' {
				return nil, fmt.Errorf("path %q: empty key at offset %d", p, i)
			}
			i++
		default:
			if len(out) > 0 && p[i-1] != '.' {
				return nil, fmt.Errorf("path %q: want . or [ at offset %d", p, i)
			}
			end := strings.IndexAny(p[i:], ".[]")
			if end < 0 {
				end = len(p) - i
			}
			if p[i:][end:] != "" && p[i+end] == ']' {
				return nil, fmt.Errorf("path %q: unexpected ] at offset %d", p, i+end)
			}
			out = append(out, PathElem{Key: p[i : i+end]})
			i += end
		}
	}
	return out, nil
}

// FormatPath writes a path the way error messages name fields.
func FormatPath(path []PathElem) string {
	s := ""
	for _, e := range path {
		if e.IsIndex {
			s = joinIndex(s, e.Index)
		} else {
			s = joinKey(s, e.Key)
		}
	}
	return s
}

// LoadWithSets is Load with --set overrides; it also returns the
// scenario as run (ParseWithSets).
func LoadWithSets(path string, sets []Set) (*Scenario, []byte, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, nil, Errors{{File: path, Msg: fmt.Sprintf("cannot read scenario: %v", err), err: err}}
	}
	return ParseWithSets(path, data, sets)
}

// ParseWithSets is Parse after applying sets to the document. It also
// returns the scenario as run: the document with the sets applied, which
// is what a run directory keeps so that a re-run reproduces it. An error a
// set causes names the flag ("--set attack.rat=5: attack.rat: unknown
// field, did you mean "rate"?") instead of a line of file.
func ParseWithSets(file string, data []byte, sets []Set) (*Scenario, []byte, error) {
	if len(sets) == 0 {
		s, err := Parse(file, data)
		return s, data, err
	}
	root, errs := parseDocument(file, data)
	if root == nil {
		return nil, nil, errOrNil(errs)
	}
	for i, s := range sets {
		if err := s.apply(root, -(i + 1)); err != nil {
			return nil, nil, err
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, nil, fmt.Errorf("%s: encode the scenario after --set: %w", file, err)
	}
	if err := enc.Close(); err != nil {
		return nil, nil, fmt.Errorf("%s: encode the scenario after --set: %w", file, err)
	}
	sc, err := parseRoot(file, root)
	if err != nil {
		if es, ok := err.(Errors); ok {
			for _, e := range es {
				// Nodes a set made carry line -(its index + 1).
				if e.Line < 0 && -e.Line <= len(sets) {
					e.File, e.Line, e.Column = "--set "+sets[-e.Line-1].shown(), 0, 0
				}
			}
		}
		return nil, nil, err
	}
	return sc, b.Bytes(), nil
}

// apply puts the set's value at its path in root, marking every node it
// creates with line mark so the decoder's errors can be traced to it.
func (s Set) apply(root *yaml.Node, mark int) error {
	val, err := s.valueNode(mark)
	if err != nil {
		return err
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("--set %s: %s", s.shown(), fmt.Sprintf(format, a...))
	}
	n := root
	done := ""
	for i, e := range s.Path {
		n = unalias(n)
		last := i == len(s.Path)-1
		if e.IsIndex {
			if n.Kind != yaml.SequenceNode {
				return fail("%s holds %s, not a list", orTop(done), describe(n))
			}
			if e.Index >= len(n.Content) {
				return fail("%s has %d items: %s does not exist", orTop(done), len(n.Content), joinIndex(done, e.Index))
			}
			if last {
				n.Content[e.Index] = replaced(root, n.Content[e.Index], val)
				return nil
			}
			n.Content[e.Index] = copyNode(n.Content[e.Index])
			n = n.Content[e.Index]
			done = joinIndex(done, e.Index)
			continue
		}
		if isNull(n) {
			*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: mark}
		}
		if n.Kind != yaml.MappingNode {
			return fail("%s holds %s, not a mapping", orTop(done), describe(n))
		}
		child := joinKey(done, e.Key)
		at := -1
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := unalias(n.Content[j]); k.Kind == yaml.ScalarNode && k.Value == e.Key {
				at = j
			}
		}
		if at < 0 {
			if !last && s.Path[i+1].IsIndex {
				return fail("%s is not set: %s does not exist", child, joinIndex(child, s.Path[i+1].Index))
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: e.Key, Line: mark},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: mark})
			at = len(n.Content) - 2
		}
		if last {
			// The key is marked too: a value of the wrong kind is reported
			// at its key.
			k := *n.Content[at]
			k.Line, k.Column = mark, 0
			n.Content[at], n.Content[at+1] = &k, replaced(root, n.Content[at+1], val)
			return nil
		}
		// An alias is shared with other places: copy it before changing it.
		n.Content[at+1] = copyNode(n.Content[at+1])
		n = n.Content[at+1]
		done = child
	}
	return nil
}

// replaced is val put where old was. A set at an anchored place changes it
// and every alias of it, as editing the file there would (a set below an
// alias changes that place only, apply copies it): val takes old's anchor
// and the aliases point at val, so that what is decoded and the scenario
// as run (which would otherwise keep aliases of an anchor gone) agree.
func replaced(root, old, val *yaml.Node) *yaml.Node {
	if old.Anchor == "" {
		return val
	}
	val.Anchor = old.Anchor
	retarget(root, old, val)
	return val
}

func retarget(n, old, val *yaml.Node) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == old {
			n.Alias = val
		}
		return
	}
	for _, c := range n.Content {
		retarget(c, old, val)
	}
}

func orTop(path string) string {
	if path == "" {
		return "the scenario"
	}
	return path
}

// valueNode parses the set's VALUE as a YAML node, every node marked.
func (s Set) valueNode(mark int) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s.Value), &doc); err != nil {
		return nil, fmt.Errorf("--set %s: invalid YAML value: %s", s.shown(), strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: mark}, nil
	}
	v := doc.Content[0]
	if hasAlias(v) {
		return nil, fmt.Errorf("--set %s: a value cannot use YAML anchors or aliases", s.shown())
	}
	markNodes(v, mark)
	return v, nil
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

func markNodes(n *yaml.Node, mark int) {
	n.Line, n.Column = mark, 0
	for _, c := range n.Content {
		markNodes(c, mark)
	}
}

func unalias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// copyNode resolves an alias into a deep copy of what it names, so a
// set below it changes this place only; other nodes are returned as they are.
func copyNode(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.AliasNode || n.Alias == nil {
		return n
	}
	return deepCopy(unalias(n))
}

func deepCopy(n *yaml.Node) *yaml.Node {
	n = unalias(n)
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = deepCopy(k)
	}
	return &c
}
