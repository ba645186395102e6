package topology

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
)

// Error is one problem in a topology file: "file:line:col: field: msg".
type Error struct {
	File   string
	Line   int
	Column int
	// Field is the dotted path of the offending value, like
	// apps[1].replicas.c4; empty for problems of the whole file.
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	for _, s := range []string{e.Field, e.Msg} {
		if s != "" {
			b.WriteString(": " + s)
		}
	}
	return b.String()
}

// Errors are all the problems of one file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// MaxFileBytes bounds a topology file (`lab up --topology FILE`): the
// built-in ones are 1 to 3 KiB. A larger file, or one that is not a
// regular file (a FIFO, /dev/zero), is refused before it is read.
const MaxFileBytes = 256 << 10

// ReadFile reads a topology file of at most MaxFileBytes.
func ReadFile(path string) ([]byte, error) {
	data, err := boundedfile.Read(path, MaxFileBytes, "a topology file")
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	return data, nil
}

// Load reads and parses a topology file.
func Load(path string) (*Topology, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes one topology document strictly, applies defaults and
// validates it. file names it in errors.
func Parse(file string, data []byte) (*Topology, error) {
	t, root, err := decode(file, data)
	if err != nil {
		return nil, err
	}
	if err := t.validateAt(file, root); err != nil {
		return nil, err
	}
	t.File = file
	return t, nil
}

// decode reads one topology document strictly, without validating it.
func decode(file string, data []byte) (*Topology, *yaml.Node, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, Errors{{File: file, Line: 1, Msg: "empty topology: want apiVersion, kind, metadata, clusters, apps and entries"}}
		}
		return nil, nil, Errors{yamlError(file, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, Errors{{File: file, Line: extra.Line, Msg: "a second YAML document: a topology file holds exactly one topology"}}
	}
	t := &Topology{}
	// KnownFields makes a misspelt field an error instead of a silently
	// ignored line, which in a lab file means a cluster without its pods.
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(t); err != nil {
		return nil, nil, decodeErrors(file, err)
	}
	return t, &root, nil
}

// validateAt applies defaults and validates t, locating each problem in
// root (the document of file) or, for an app or Service of the
// manifests, naming the manifest's file, line and object.
func (t *Topology) validateAt(file string, root *yaml.Node) error {
	t.applyDefaults()
	issues := t.check()
	if len(issues) == 0 {
		return nil
	}
	var errs Errors
	for _, i := range issues {
		if src := t.sourceOf(i.path); src != nil {
			errs = append(errs, &Error{File: src.File, Line: src.Line, Field: src.What, Msg: i.msg})
			continue
		}
		e := &Error{File: file, Field: i.field(), Msg: i.msg}
		if n := locate(root.Content[0], i.path); n != nil {
			e.Line, e.Column = n.Line, n.Column
		}
		errs = append(errs, e)
	}
	sort.SliceStable(errs, func(a, b int) bool {
		if errs[a].File != errs[b].File {
			return errs[a].File == file // lab.yaml's first, then the manifests' by name
		}
		return errs[a].Line < errs[b].Line
	})
	return errs
}

// sourceOf is the manifest an issue's app or Service comes from, or nil.
func (t *Topology) sourceOf(path []any) *workloadSource {
	if len(path) < 2 {
		return nil
	}
	i, ok := path[1].(int)
	if !ok {
		return nil
	}
	switch {
	case path[0] == "apps" && i < len(t.Apps):
		return t.Apps[i].source
	case path[0] == "services" && i < len(t.Services):
		return t.Services[i].source
	}
	return nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

func yamlError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: n, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: file, Msg: "invalid YAML: " + msg}
}

// unknownField rewrites yaml.v3's "field x not found in type topology.App"
// into words a lab user knows.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

func decodeErrors(file string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return Errors{yamlError(file, err)}
	}
	var errs Errors
	for _, s := range te.Errors {
		s = unknownField.ReplaceAllString(s, "unknown field $1")
		s = strings.ReplaceAll(s, "!!", "")
		errs = append(errs, yamlError(file, errors.New(s)))
	}
	return errs
}

// locate finds the node of a path (keys and indexes) in the document;
// for a missing field it returns the nearest present ancestor, so a
// required field left out is reported where it belongs. A mapping or list
// value is reported at its key, where a reader looks.
func locate(n *yaml.Node, path []any) *yaml.Node {
	cur, at := n, n
	for _, seg := range path {
		switch s := seg.(type) {
		case string:
			if cur.Kind != yaml.MappingNode {
				return at
			}
			found := false
			for i := 0; i+1 < len(cur.Content); i += 2 {
				if cur.Content[i].Value == s {
					cur, at = cur.Content[i+1], cur.Content[i]
					if cur.Kind == yaml.ScalarNode {
						at = cur
					}
					found = true
					break
				}
			}
			if !found {
				return at
			}
		case int:
			if cur.Kind != yaml.SequenceNode || s >= len(cur.Content) {
				return at
			}
			cur, at = cur.Content[s], cur.Content[s]
		}
	}
	return at
}

// issue is a validation problem at a path of keys and indexes.
type issue struct {
	path []any
	msg  string
}

func (i issue) field() string {
	var b strings.Builder
	for _, seg := range i.path {
		switch s := seg.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		}
	}
	return b.String()
}
