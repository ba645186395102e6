package scenarios

import (
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"
)

// Validate checks a scenario built in code or loaded from the catalog.
// Parse already validates what it returns; this version cannot know lines,
// so its errors carry the file (if any) and the field but no position.
func (s *Scenario) Validate() error {
	var errs Errors
	for _, i := range s.check() {
		errs = append(errs, &FieldError{File: s.File, Field: i.path, Msg: i.msg})
	}
	return errOrNil(errs)
}

// Dimensions are what an expectation may group requests by.
func Dimensions() []string { return []string{"cluster", "pod", "version"} }

// SplitModels are the expected-share models (docs/statistics.md §1).
func SplitModels() []string {
	return []string{"weights", "equal", "equal-per-pod", "link-cost-inverse", "link-cost-balanced"}
}

// TemplateData is what {{.RequestID}} and {{.Seq}} in the target URL or
// path, headers and body expand to for each request.
type TemplateData struct {
	// RequestID is the run id plus the sequence number, also sent in the
	// request id header, so logs and mirrors can be joined back.
	RequestID string
	// Seq is the request's 0-based sequence number in the attack.
	Seq uint64
}

// ParseTemplate parses a request template. It is executed once on sample
// data here, so a misspelled {{.RequestId}} is a load error rather than a
// failure of every request mid-attack.
func ParseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("invalid template: %s", trimTemplateErr(name, err))
	}
	if err := t.Execute(io.Discard, TemplateData{RequestID: "run-0", Seq: 0}); err != nil {
		return nil, fmt.Errorf("invalid template (only {{.RequestID}} and {{.Seq}} exist): %s", trimTemplateErr(name, err))
	}
	return t, nil
}

// trimTemplateErr drops text/template's "template: NAME:" prefix and its
// "executing ... at <...>:" context, which repeat what the field says.
func trimTemplateErr(name string, err error) string {
	msg := strings.TrimPrefix(err.Error(), "template: "+name+":")
	if _, after, ok := strings.Cut(msg, "executing "); ok {
		if i := strings.Index(after, ">: "); i >= 0 {
			return after[i+3:]
		}
	}
	return strings.TrimSpace(msg)
}

// checker collects issues; add keeps the call sites short.
type checker struct{ issues []issue }

func (c *checker) add(path, format string, args ...any) {
	c.issues = append(c.issues, issue{path: path, msg: fmt.Sprintf(format, args...)})
}

// addDeps records an issue that follows from the fields in deps.
func (c *checker) addDeps(path string, deps []string, format string, args ...any) {
	c.issues = append(c.issues, issue{path: path, msg: fmt.Sprintf(format, args...), deps: deps})
}

func (c *checker) addKey(path, format string, args ...any) {
	c.issues = append(c.issues, issue{path: path, msg: fmt.Sprintf(format, args...), atKey: true})
}

// check is validation without positions; Parse positions the issues.
func (s *Scenario) check() []issue {
	c := &checker{}
	if s.APIVersion != APIVersion {
		if s.APIVersion == "" {
			c.add("apiVersion", "required: %s", APIVersion)
		} else {
			c.add("apiVersion", "unsupported version %q: this build reads %s", s.APIVersion, APIVersion)
		}
	}
	if s.Kind != Kind {
		c.add("kind", "want %s, got %q", Kind, s.Kind)
	}
	switch {
	case s.Metadata.Name == "":
		c.add("metadata.name", "required: a name like url-split (lowercase letters, digits, '-' and '.')")
	case !isDNSName(s.Metadata.Name):
		c.add("metadata.name", "invalid name %q: want lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters", s.Metadata.Name)
	}
	s.checkClusters(c)
	s.checkTarget(c)
	s.checkAttack(c)
	s.checkWorkers(c)
	s.checkAttribution(c)
	s.checkObserve(c)
	s.checkStatistics(c)
	s.checkExpect(c)
	s.checkSources(c)
	return c.issues
}

// Upper bounds of the attack (README.md, "Limits"): beyond them a run
// exhausts memory, descriptors or the machine before it measures anything
// (a concurrency of 10^12 is Go's out-of-memory crash; a rate of 2^63/ns
// opened thousands of connections a second).
const (
	MaxConcurrency = 10_000
	MaxRequests    = 1_000_000_000
	MaxRate        = 1_000_000.0 // per second
	MaxDuration    = 24 * time.Hour
	MaxTimeout     = 10 * time.Minute
	MaxBodyLimit   = Size(64 << 20)
	// MaxWeight bounds split weights: shares are weights over their sum,
	// and beyond this ratio of largest to smallest a share is below what
	// any run could measure.
	MaxWeight = 1e9
)

// explicitZeros catches a 0 written out for a field whose zero means
// "use the default": the default would silently replace what was written.
// It also catches a 0 written where 0 reads as "missing", so the message
// does not call a field that is there required; Parse then drops the
// other complaints about the same field.
func explicitZeros(s *Scenario, pos positions) []issue {
	var out []issue
	check := func(path string, zero bool, def string) {
		if l, ok := pos[path]; ok && zero && l.val != nil && !isNull(l.val) {
			out = append(out, issue{path: path, msg: "0 is not allowed here; leave the field out for the default " + def})
		}
	}
	check("attack.timeout", s.Attack.Timeout.Duration == 0, DefaultTimeout.String())
	check("attack.maxBody", s.Attack.MaxBody == 0, DefaultMaxBody.String())
	if l, ok := pos["attack.successCodes"]; ok && l.val != nil && !isNull(l.val) && len(l.val.Content) == 0 {
		out = append(out, issue{path: "attack.successCodes", msg: "an empty list counts no answer as a success; leave the field out for the default " + DefaultSuccessCodes})
	}
	check("statistics.confidence", s.Statistics.Confidence == 0, "0.95")
	check("statistics.power", s.Statistics.Power == 0, "0.8")
	check("statistics.margin", s.Statistics.Margin == 0, DefaultMargin.String())
	check("statistics.looks", s.Statistics.Looks == 0, "(5 with stop: early)")
	for i, w := range s.Observe {
		if l := w.Logs; l != nil {
			p := joinIndex("observe", i) + ".logs"
			check(p+".settle", l.Settle.Duration == 0, DefaultLogSettle.String())
			check(p+".skew", l.Skew.Duration == 0, DefaultLogSkew.String())
		}
	}
	for i, e := range s.Expect {
		p := joinIndex("expect", i)
		for _, k := range e.specs() {
			out = append(out, k.explicitZeros(p+"."+k.Kind(), pos, check)...)
		}
	}
	return out
}
