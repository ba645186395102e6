package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []PathElem
		err  string
	}{
		{in: "attack.rate", want: []PathElem{{Key: "attack"}, {Key: "rate"}}},
		{in: "expect[0].split.tolerance", want: []PathElem{{Key: "expect"}, {Index: 0, IsIndex: true}, {Key: "split"}, {Key: "tolerance"}}},
		{in: "clusters[12]", want: []PathElem{{Key: "clusters"}, {Index: 12, IsIndex: true}}},
		{in: `attack.headers["x.b[1]"]`, want: []PathElem{{Key: "attack"}, {Key: "headers"}, {Key: "x.b[1]"}}},
		{in: "", err: "empty path"},
		{in: ".a", err: "empty key"},
		{in: "a..b", err: "empty key"},
		{in: "a.", err: "empty key"},
		{in: "a[", err: "unterminated ["},
		{in: "a[x]", err: "not a whole number"},
		{in: "a[-1]", err: "not a whole number"},
		{in: "a[01]", err: "not a whole number"},
		{in: "a]", err: "unexpected ]"},
		{in: "a[0]b", err: "want . or ["},
		{in: `a["x`, err: "unterminated quoted key"},
		{in: `a["x"`, err: "want ] after the quoted key"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePath(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParsePath(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParsePath(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if back := FormatPath(got); back != tc.in {
				t.Errorf("FormatPath = %q, want %q", back, tc.in)
			}
		})
	}
}

// FuzzParsePath: whatever parses formats back to a path that parses to
// the same elements (the paths of error messages are what --set takes).
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"attack.rate", "expect[0].split.tolerance", `a["b.c"][3].d`, "a[", "a..b", `a["\x00"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			return
		}
		if len(p) == 0 {
			t.Fatalf("ParsePath(%q) = no elements, no error", s)
		}
		back := FormatPath(p)
		q, err := ParsePath(back)
		if err != nil || !slices.Equal(p, q) {
			t.Fatalf("ParsePath(%q) = %v; formatted %q parses to %v, %v", s, p, back, q, err)
		}
	})
}

func kumaCanary(t *testing.T) []byte {
	t.Helper()
	src, err := BuiltinSource("kuma-canary")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestSetsChangeTheScenario(t *testing.T) {
	t.Parallel()
	src := kumaCanary(t)
	sets, err := ParseSets([]string{"attack.rate=500/s", "attack.duration=30s", "attack.requests=",
		"expect[0].split.margin=3%", "clusters[1].context=kind-c9", "observe[0].namespace=demo",
		"attack.headers.X-Gate=yes", "metadata.description=set by a flag",
		"observe[0].clusters=[c1, c2]"})
	if err != nil {
		t.Fatal(err)
	}
	sc, asRun, err := ParseWithSets("k.yaml", src, sets)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Attack.Rate.PerSecond() != 500 || sc.Attack.Duration.Duration != 30*time.Second || sc.Attack.Requests != 0 {
		t.Errorf("attack = rate %v duration %v requests %d", sc.Attack.Rate, sc.Attack.Duration, sc.Attack.Requests)
	}
	if sc.Expect[0].Split.Margin == nil || sc.Clusters[1].Context != "kind-c9" || sc.Observe[0].Namespace != "demo" ||
		sc.Attack.Headers["X-Gate"] != "yes" || sc.Metadata.Description != "set by a flag" || !slices.Equal(sc.Observe[0].Clusters, []string{"c1", "c2"}) {
		t.Errorf("not applied: tolerance %v, clusters %+v, observe %+v, headers %v, description %q",
			sc.Expect[0].Split.Margin, sc.Clusters, sc.Observe[0], sc.Attack.Headers, sc.Metadata.Description)
	}
	// The scenario as run reproduces the run with no flags.
	again, err := Parse("scenario.yaml", asRun)
	if err != nil {
		t.Fatalf("the scenario as run does not load: %v\n%s", err, asRun)
	}
	if again.Attack.Rate.PerSecond() != 500 || again.Clusters[1].Context != "kind-c9" || again.Observe[0].Namespace != "demo" {
		t.Errorf("scenario as run lost the sets:\n%s", asRun)
	}
	if !strings.Contains(string(asRun), "# ") {
		t.Errorf("the scenario as run lost the file's comments:\n%s", asRun)
	}
	// Without sets the source is returned as it is.
	if _, same, err := ParseWithSets("k.yaml", src, nil); err != nil || string(same) != string(src) {
		t.Errorf("no sets: source changed or %v", err)
	}
}

func TestSetErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	src := kumaCanary(t)
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"attack.rat=5", []string{`--set attack.rat=5: attack.rat: unknown field, did you mean "rate"?`}},
		{"attack.rate=fast", []string{`--set attack.rate=fast: attack.rate: rate "fast"`}},
		{"attack.requests=2.5", []string{"--set attack.requests=2.5: attack.requests: want a whole number"}},
		{"expect[5].split.margin=3%", []string{"--set expect[5].split.margin=3%: expect has 3 items: expect[5] does not exist"}},
		{"expect[0].split.tolerance=3", []string{"--set expect[0].split.tolerance=3: expect[0].split.tolerance: unknown field"}},
		{"observe[0].selector.app=x", []string{"--set observe[0].selector.app=x: observe[0].selector holds string \"app=test-server\", not a mapping"}},
		{"attack.rate[0]=1", []string{"--set attack.rate[0]=1: attack.rate holds string \"200/s\", not a list"}},
		{"target.tls[0]=1", []string{"--set target.tls[0]=1: target.tls is not set: target.tls[0] does not exist"}},
		{"attack=[1, 2]", []string{"--set attack=[1, 2]: attack: want a mapping with rate"}},
		{"attack.rate=[", []string{"--set attack.rate=[: invalid YAML value"}},
		{"attack.rate", []string{"--set attack.rate: want PATH=VALUE"}},
		{"attack..rate=1", []string{"--set attack..rate=1: path", "empty key"}},
		{"attack.rate=&a 1", []string{"anchors or aliases"}},
		{"expect[0].split.weights.c9=10", []string{"--set expect[0].split.weights.c9=10: expect[0].split.weights.c9"}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			sets, err := ParseSets([]string{tc.set})
			if err == nil {
				_, _, err = ParseWithSets("k.yaml", src, sets)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "k.yaml:-") {
				t.Errorf("a flag's error has a negative file line: %v", err)
			}
		})
	}
}

// A set below an alias changes that place only, not the anchor's other uses.
func TestSetBelowAliasCopies(t *testing.T) {
	t.Parallel()
	src := strings.Replace(string(kumaCanary(t)), "clusters:\n  - {name: c1, context: kind-c1}\n  - {name: c2, context: kind-c2}",
		"clusters:\n  - &c {name: c1, context: kind-c1}\n  - {name: c2, context: kind-c2}", 1)
	src = strings.Replace(src, "target:\n", "x-shared: [*c]\ntarget:\n", 1)
	sets, _ := ParseSets([]string{"clusters[0].context=kind-c7"})
	_, _, err := ParseWithSets("k.yaml", []byte(src), sets)
	// x-shared is not a scenario field: the error shows the file decoded
	// with the anchor's copy untouched, at a line of the file.
	if err == nil || !strings.Contains(err.Error(), "x-shared: unknown field") || strings.Contains(err.Error(), "--set") {
		t.Fatalf("err = %v", err)
	}
}

// A set at an anchored place changes it and every alias of it, as editing
// the file there would; below an alias, only that place. The scenario as
// run loads and means the same.
func TestSetAtAnAnchor(t *testing.T) {
	t.Parallel()
	src := strings.Replace(string(kumaCanary(t)), "expect:\n", `expect:
  - name: shared-a
    split: &even {weights: {c1: 1, c2: 1}, margin: 5%}
  - name: shared-b
    split: *even
`, 1)
	margins := func(sc *Scenario) (a, b float64) {
		return sc.Expect[0].Split.Margin.Fraction(), sc.Expect[1].Split.Margin.Fraction()
	}
	for _, tc := range []struct {
		set  string
		a, b float64
	}{
		{"expect[0].split.margin=7%", 0.07, 0.07},                             // inside the anchored node
		{"expect[0].split={weights: {c1: 3, c2: 1}, margin: 8%}", 0.08, 0.08}, // the anchored node replaced
		{"expect[1].split.margin=9%", 0.05, 0.09},                             // below the alias
	} {
		t.Run(tc.set, func(t *testing.T) {
			sets, err := ParseSets([]string{tc.set})
			if err != nil {
				t.Fatal(err)
			}
			sc, asRun, err := ParseWithSets("k.yaml", []byte(src), sets)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := margins(sc); a != tc.a || b != tc.b {
				t.Errorf("margins %v, %v; want %v, %v", a, b, tc.a, tc.b)
			}
			again, err := Parse("scenario.yaml", asRun)
			if err != nil {
				t.Fatalf("the scenario as run does not load: %v\n%s", err, asRun)
			}
			if a, b := margins(again); a != tc.a || b != tc.b {
				t.Errorf("scenario as run: margins %v, %v; want %v, %v\n%s", a, b, tc.a, tc.b, asRun)
			}
		})
	}
}

// A credential given with --set is not repeated in its errors.
func TestSetErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	sets, err := ParseSets([]string{"attack.headers.Authorization={Bearer s3cr3t"})
	if err == nil {
		_, _, err = ParseWithSets("k.yaml", kumaCanary(t), sets)
	}
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "--set attack.headers.Authorization=REDACTED") {
		t.Fatalf("err = %v", err)
	}
}

// TestSetLimits: every bound of --set is explicit and refused fast with
// an error naming it; a 16,000-segment path (once 8 s and 570 MiB) is
// refused by ParseSets, before any node of the scenario is built. At the bounds, a path or value is
// still parsed.
func TestSetLimits(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("a.", 16000) + "b=1"
	long := "attack.headers.X=" + strings.Repeat("v", MaxSetValueBytes+1)
	wide := "attack." + strings.Repeat("k", MaxSetPathLen) + "=1"
	many := make([]string, MaxSets+1)
	for i := range many {
		many[i] = "attack.rate=1/s"
	}
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"deep path", []string{deep}, "more than 512"},
		{"segments", []string{strings.Repeat("a.", MaxSetPathSegments) + "b=1"}, "more than 32 keys"},
		{"long value", []string{long}, "more than 65536"},
		{"long path", []string{wide}, "more than 512"},
		{"too many", many, "more than 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSets(tc.sets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes: the argument must be quoted truncated", len(err.Error()))
			}
		})
	}
	// At the bounds: parsed.
	if _, err := ParseSets([]string{strings.Repeat("a.", MaxSetPathSegments-1) + "b=1"}); err != nil {
		t.Errorf("%d segments: %v", MaxSetPathSegments, err)
	}
	if _, err := ParseSets([]string{"attack.headers.X=" + strings.Repeat("v", MaxSetValueBytes)}); err != nil {
		t.Errorf("a value of %d bytes: %v", MaxSetValueBytes, err)
	}
}

// A --set path is bounded in bytes and in segments, and refused at once
// however long (it used to take 8 s and 570 MiB at 16,000 segments).
func TestSetPathBounds(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("a.", MaxSetPathSegments) + "b"
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"16,000 segments", strings.Repeat("a.", 16_000) + "b=1", "more than 512"},
		{"one segment too many", deep + "=1", fmt.Sprintf("more than %d keys and indices", MaxSetPathSegments)},
		{"indices count", "a" + strings.Repeat("[0]", MaxSetPathSegments) + "=1", fmt.Sprintf("more than %d keys and indices", MaxSetPathSegments)},
		{"one byte too long", strings.Repeat("k", MaxSetPathLen+1) + "=1", "513 bytes"},
		{"at the limits", strings.Repeat("a.", MaxSetPathSegments-1) + "b=1", ""},
		{"at the length limit", strings.Repeat("k", MaxSetPathLen) + "=1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Refused by ParseSet itself, before any node is built.
			_, err := ParseSet(tc.raw)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			case err != nil && len(err.Error()) > 300:
				t.Errorf("the error quotes the whole path (%d bytes)", len(err.Error()))
			}
		})
	}
}
