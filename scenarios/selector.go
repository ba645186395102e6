package scenarios

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// This file checks label selectors the way the API server will parse them,
// so a typo in observe[].selector is a load error rather than a run that
// lists no pods. labels.Parse (what kube and the API server use) decides;
// explainSelector says why in the scenario's own words, since labels.Parse
// reports "unable to parse requirement: <nil>: Invalid value: ..." with the
// validation regex. explainSelector follows labels.Parse (v0.37) token for
// token: the same lexer (any run of bytes other than blanks and "=!(),<>"
// is a word; "in" and "notin" are keywords only where an operator is
// expected), the same grammar
//
//	selector    ::= requirement { "," requirement }
//	requirement ::= ["!"] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//
// and the same key and value rules (content.IsLabelKey, IsValidLabelValue;
// ">" and "<" take an integer). FuzzSelector checks that the two agree. It
// is stricter in one place: a NUL byte, where labels.Parse silently ends
// the selector, is refused.

type selTok int

const (
	selEnd selTok = iota
	selWord
	selIn
	selNotIn
	selOpen
	selClose
	selComma
	selNot
	selEq
	selEqEq
	selNotEq
	selGt
	selLt
)

type selItem struct {
	tok selTok
	lit string
}

func selKeyword(s string) (selTok, bool) {
	switch s {
	case "in":
		return selIn, true
	case "notin":
		return selNotIn, true
	}
	return 0, false
}

func selSymbol(s string) (selTok, bool) {
	switch s {
	case "(":
		return selOpen, true
	case ")":
		return selClose, true
	case ",":
		return selComma, true
	case "!":
		return selNot, true
	case "=":
		return selEq, true
	case "==":
		return selEqEq, true
	case "!=":
		return selNotEq, true
	case ">":
		return selGt, true
	case "<":
		return selLt, true
	}
	return 0, false
}

func isSelBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isSelSymbol(c byte) bool { return strings.IndexByte("=!(),><", c) >= 0 }

// lexSelector splits a selector into tokens. A run of symbols is cut after
// its longest prefix that is an operator ("!==" → "!=", "="), as the API
// server's lexer does.
func lexSelector(s string) []selItem {
	var out []selItem
	i := 0
	for {
		for i < len(s) && isSelBlank(s[i]) {
			i++
		}
		if i == len(s) {
			return append(out, selItem{selEnd, ""})
		}
		start := i
		if isSelSymbol(s[i]) {
			best, tok := 0, selTok(0)
			for j := i + 1; j <= len(s) && isSelSymbol(s[j-1]); j++ {
				if t, ok := selSymbol(s[i:j]); ok {
					best, tok = j, t
				} else if best > 0 {
					break
				}
			}
			// Every single symbol is an operator, so best > start.
			out = append(out, selItem{tok, s[start:best]})
			i = best
			continue
		}
		for i < len(s) && !isSelBlank(s[i]) && !isSelSymbol(s[i]) {
			i++
		}
		w := s[start:i]
		if t, ok := selKeyword(w); ok {
			out = append(out, selItem{t, w})
		} else {
			out = append(out, selItem{selWord, w})
		}
	}
}

type selParser struct {
	items []selItem
	pos   int
}

// peek and next return the current token; where a value is expected
// (values=true) the keywords in and notin are plain words.
func (p *selParser) peek(values bool) selItem {
	it := p.items[p.pos]
	if values && (it.tok == selIn || it.tok == selNotIn) {
		it.tok = selWord
	}
	return it
}

func (p *selParser) next(values bool) selItem {
	it := p.peek(values)
	if p.pos < len(p.items)-1 {
		p.pos++
	}
	return it
}

func (it selItem) String() string {
	if it.tok == selEnd {
		return "the end"
	}
	return strconv.Quote(it.lit)
}

// checkSelector reports why the API server would refuse sel, or nil.
// An empty selector (all pods) is valid here; callers that require one
// check that first.
func checkSelector(sel string) error {
	if err := explainSelector(sel); err != nil {
		return err
	}
	if _, err := labels.Parse(sel); err != nil {
		// explainSelector missed a rule of a newer labels.Parse.
		msg := strings.TrimPrefix(err.Error(), "unable to parse requirement: ")
		return errors.New(strings.TrimPrefix(msg, "<nil>: "))
	}
	return nil
}

// explainSelector is labels.Parse with messages for a scenario's reader.
func explainSelector(sel string) error {
	if strings.IndexByte(sel, 0) >= 0 {
		return fmt.Errorf("contains a NUL byte")
	}
	p := &selParser{items: lexSelector(sel)}
	if p.peek(true).tok == selEnd {
		return nil
	}
	for {
		if it := p.peek(true); it.tok != selWord && it.tok != selNot {
			return fmt.Errorf("found %s where a label key (or !key) was expected", it)
		}
		if err := p.requirement(); err != nil {
			return err
		}
		switch it := p.next(true); it.tok {
		case selEnd:
			return nil
		case selComma:
		default:
			return fmt.Errorf("found %s after a complete requirement, want \",\" or the end", it)
		}
	}
}

func (p *selParser) requirement() error {
	not := false
	it := p.next(true)
	if it.tok == selNot {
		not = true
		it = p.next(true)
	}
	if it.tok != selWord {
		return fmt.Errorf("found %s where a label key was expected", it)
	}
	key := it.lit
	if err := checkLabelKey(key); err != nil {
		return err
	}
	if t := p.peek(true).tok; not || t == selEnd || t == selComma {
		// "key" (exists) or "!key" (does not exist): no operator, no value.
		return nil
	}
	op := p.next(false)
	var values []string
	switch op.tok {
	case selIn, selNotIn:
		if open := p.next(true); open.tok != selOpen {
			return fmt.Errorf("found %s after %s %s, want \"(\" and a list of values", open, key, op.lit)
		}
		for {
			// Empty values are allowed: "x in (a,,b)", "x in ()".
			v := ""
			if p.peek(true).tok == selWord {
				v = p.next(true).lit
			}
			values = append(values, v)
			switch it := p.next(true); it.tok {
			case selComma:
				continue
			case selClose:
			default:
				return fmt.Errorf("found %s in the values of %s %s (...), want a value, \",\" or \")\"", it, key, op.lit)
			}
			break
		}
	case selEq, selEqEq, selNotEq, selGt, selLt:
		v := ""
		switch it := p.peek(true); it.tok {
		case selEnd, selComma:
		case selWord:
			v = p.next(true).lit
		default:
			return fmt.Errorf("found %s after %s%s, want a value", it, key, op.lit)
		}
		if op.tok == selGt || op.tok == selLt {
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("%s%s%s: > and < compare with a whole number", key, op.lit, v)
			}
		}
		values = append(values, v)
	default:
		return fmt.Errorf("found %s after key %s, want an operator: in, notin, =, ==, !=, > or <", op, strconv.Quote(key))
	}
	for _, v := range values {
		if err := checkLabelValue(v); err != nil {
			return err
		}
	}
	return nil
}

// Label keys and values (k8s.io/apimachinery/pkg/api/validate/content).
var (
	labelNameRE  = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// checkLabelKey accepts NAME or PREFIX/NAME: NAME up to 63 letters,
// digits, '-', '_' and '.', starting and ending with a letter or digit;
// PREFIX a DNS subdomain (lowercase) of up to 253 characters.
func checkLabelKey(k string) error {
	const want = "want up to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, optionally after a DNS subdomain and '/' (like app.kubernetes.io/name)"
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if strings.Contains(rest, "/") || prefix == "" || len(prefix) > 253 || !dnsSubdomain.MatchString(prefix) {
			return fmt.Errorf("invalid label key %q: %s", k, want)
		}
		name = rest
	}
	if len(name) > 63 || !labelNameRE.MatchString(name) {
		return fmt.Errorf("invalid label key %q: %s", k, want)
	}
	return nil
}

func checkLabelValue(v string) error {
	if v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
		return fmt.Errorf("invalid label value %q: want up to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit (or nothing)", v)
	}
	return nil
}
