package scenarios

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestCheckSelector pins the messages. Every case is also a seed of
// FuzzSelector, which checks explainSelector against labels.Parse (a
// 3-minute run, about 7 million inputs, found no disagreement). want is ""
// for a valid selector, else a substring of the error.
func TestCheckSelector(t *testing.T) {
	t.Parallel()
	for _, c := range selectorCases {
		err := checkSelector(c.sel)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", c.sel, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q", c.sel, err, c.want)
		}
	}
}

// FuzzSelector checks that explainSelector accepts exactly what
// labels.Parse accepts: run with go test -fuzz FuzzSelector ./scenarios/.
func FuzzSelector(f *testing.F) {
	for _, c := range selectorCases {
		f.Add(c.sel)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		if strings.IndexByte(sel, 0) >= 0 {
			return // refused on purpose; labels.Parse stops at the NUL
		}
		_, lerr := labels.Parse(sel)
		if err := explainSelector(sel); (err == nil) != (lerr == nil) {
			t.Errorf("%q: explainSelector: %v; labels.Parse: %v", sel, err, lerr)
		}
	})
}

var selectorCases = []struct{ sel, want string }{
	{"", ""},
	{"app", ""},
	{"!app", ""},
	{"! app", ""},
	{"app=callme-service,version in (v1,v2)", ""},
	{"app==x", ""},
	{"app!=x", ""},
	{"app=", ""}, // the empty value
	{"app = x", ""},
	{"x\t=\ty\n", ""},
	{"app notin (a)", ""},
	{"app in ()", ""},
	{"app in (,)", ""},
	{"app in (a,)", ""},
	{"app in (a,,b)", ""},
	{"app in(a)", ""},
	{"in in (in)", ""}, // in and notin are keywords only as operators
	{"notin notin (notin)", ""},
	{"in=notin", ""},
	{"x>1", ""},
	{"x<0001", ""},
	{"x notin(a),!y,z=1,w!=2,v>3", ""},
	{"app.kubernetes.io/name=callme", ""},
	{"a_b.c=D-e.F_g", ""},
	{"x=" + strings.Repeat("a", 63), ""},
	{"app in (a b)", `found "b" in the values of app in (...), want a value, "," or ")"`},
	{"app in v1", `found "v1" after app in, want "(" and a list of values`},
	{"app in (a", `found the end in the values of app in (...)`},
	{"app in", `found the end after app in, want "("`},
	{"x in ((a))", `found "(" in the values of x in (...)`},
	{"x in (a))", `found ")" after a complete requirement, want "," or the end`},
	{"appin (a)", `found "(" after key "appin", want an operator: in, notin, =, ==, !=, > or <`},
	{"x y", `found "y" after key "x", want an operator`},
	{"x!y", `found "!" after key "x", want an operator`},
	{"x=y z", `found "z" after a complete requirement, want "," or the end`},
	{"x=y=z", `found "=" after a complete requirement`},
	{"!x=y", `found "=" after a complete requirement`},
	{"x,", `found the end where a label key (or !key) was expected`},
	{",x", `found "," where a label key (or !key) was expected`},
	{"x,,y", `found "," where a label key (or !key) was expected`},
	{"(x)", `found "(" where a label key (or !key) was expected`},
	{"!!x", `found "!" where a label key was expected`},
	{"!", `found the end where a label key was expected`},
	{"x=!y", `found "!" after x=, want a value`},
	{"x===y", `found "=" after x==, want a value`},
	{"x>=1", `found "=" after x>, want a value`},
	{"x<>y", `found ">" after x<, want a value`},
	{"x>a", `x>a: > and < compare with a whole number`},
	{"x>", `x>: > and < compare with a whole number`},
	{"x>99999999999999999999", `> and < compare with a whole number`},
	{"x>-1", `invalid label value "-1"`},
	{"a=-b", `invalid label value "-b"`},
	{"x in (é)", `invalid label value "é"`},
	{"x=" + strings.Repeat("a", 64), `invalid label value "aaaa`},
	{"-a=b", `invalid label key "-a"`},
	{"A.b/c=d", `invalid label key "A.b/c"`}, // the prefix is a lowercase DNS subdomain
	{"/c=d", `invalid label key "/c"`},
	{"a/b/c=d", `invalid label key "a/b/c"`},
	{strings.Repeat("k", 64), `invalid label key "kkkk`},
	{"app=x\x00", "contains a NUL byte"}, // labels.Parse stops at the NUL
}

// TestCheckLabelKey compares checkLabelKey with apimachinery's own check.
func TestCheckLabelKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{
		"version", "app.kubernetes.io/version", "a", "A_b-c.D", strings.Repeat("a", 63), strings.Repeat("a", 253) + "/x",
		"", "/x", "x/", "Example.com/x", "x/y/z", "-x", "x_", strings.Repeat("a", 64), strings.Repeat("a", 254) + "/x", "é",
	} {
		valid := len(validation.IsQualifiedName(k)) == 0
		if err := checkLabelKey(k); (err == nil) != valid {
			t.Errorf("%q: checkLabelKey %v, apimachinery valid=%v", k, err, valid)
		}
	}
}
