// Package worker is `mesh-verify worker`, one pod of a distributed run
// (docs/distributed.md, The worker): it reads its ConfigMap and Secret, prints a
// ready record, waits for the coordinator's start signal, attacks its
// share of the scenario with a local run's own attack, sink and tally
// (measure.Attack), and prints its cumulative state as fleet records on
// stdout.
//
// It is a package of its own rather than part of fleet: fleet is the
// coordinator's side (the Jobs, the records, the merge), this the pod's
// process at the other end; both stand on measure and on fleet's record
// format, and neither needs the runner.
package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/internal/certpem"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// The keys of the ConfigMap and the Secret, and the ConfigMap's
// annotations (docs/distributed.md, The worker): kube's, which writes them
// when it creates both.
const (
	// KeyScenario is the Secret's.
	KeyScenario = kube.WorkerKeyScenario
	// KeyInventory and KeyRun are the ConfigMap's.
	KeyInventory = kube.WorkerKeyInventory
	KeyRun       = kube.WorkerKeyRun
	// KeyCA is the Secret's optional PEM certificates of the scenario's
	// target.tls.ca.
	KeyCA = kube.WorkerKeyCA
	// AnnotationStartAt is the instant (RFC 3339 with nanoseconds) every
	// worker starts its attack at; the coordinator sets it once all are ready.
	AnnotationStartAt = kube.AnnotationStartAt
	// AnnotationStop "true" stops the attack: final record, exit 0.
	AnnotationStop = kube.AnnotationStop
)

// Limits on what a ConfigMap and a Secret may say, each checked by
// ParseConfig or MergeData.
const (
	// MaxConfigMapBytes is Kubernetes' own bound on a ConfigMap, and on a
	// Secret.
	MaxConfigMapBytes = 1 << 20
	// MaxDataBytes bounds the ConfigMap's and the Secret's data together.
	MaxDataBytes = 2 * MaxConfigMapBytes
	// MaxRunBytes bounds run.json: a run id, a URL and two numbers are
	// far below it; the scenario's own bounds do not reach it.
	MaxRunBytes = 16 << 10
	// MaxRunIDBytes bounds run.json's runId: it prefixes every request id.
	MaxRunIDBytes = 128
	// MinInterval and MaxInterval bound run.json's interval: records
	// more often than MinInterval cost the coordinator a merge each; less
	// often than MaxInterval leaves it blind for too long.
	MinInterval = 500 * time.Millisecond
	MaxInterval = 5 * time.Minute
	// MaxInventoryPods bounds inventory.json (a pod is at least 40 bytes
	// of JSON, so a ConfigMap holds fewer anyway).
	MaxInventoryPods = 25_000
)

// RunConfig is run.json (fleet.RunConfig: the coordinator writes it).
type RunConfig = fleet.RunConfig

// Config is a worker's ConfigMap and Secret, read and checked.
type Config struct {
	// Scenario is the resolved scenario (--set applied), its attack not
	// yet divided (Share does that).
	Scenario *scenarios.Scenario
	// Pods are the pods of every cluster of the scenario, for attribution.
	Pods     []kube.Pod
	Run      RunConfig
	Interval time.Duration
	// CA is ca.pem: the certificates of the scenario's target.tls.ca,
	// read by the coordinator (nil when it names none), never a key.
	CA []byte
}

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// secretKeys are the keys of the Secret, configMapKeys the ConfigMap's.
var (
	secretKeys    = []string{KeyScenario, KeyCA}
	configMapKeys = []string{KeyInventory, KeyRun}
)

// MergeData checks that the ConfigMap holds only its keys and the Secret
// only its own (a scenario or a CA in a ConfigMap is refused: anyone who
// may view the namespace reads it), each within MaxConfigMapBytes, and
// returns their data as one map for ParseConfig. name is "namespace/name"
// of both.
func MergeData(name string, cm map[string]string, secret map[string][]byte) (map[string]string, error) {
	out := make(map[string]string, len(cm)+len(secret))
	var errs []error
	size := 0
	for _, k := range slices.Sorted(maps.Keys(cm)) {
		size += len(k) + len(cm[k])
		if !slices.Contains(configMapKeys, k) {
			where := "want only " + strings.Join(configMapKeys, " and ")
			if slices.Contains(secretKeys, k) {
				where = "it belongs in the Secret, which only the workers read"
			}
			errs = append(errs, fmt.Errorf("configmap %s: key %q refused: %s", name, k, where))
			continue
		}
		out[k] = cm[k]
	}
	if size > MaxConfigMapBytes {
		errs = append(errs, fmt.Errorf("configmap %s: %d bytes of data, at most %d", name, size, MaxConfigMapBytes))
	}
	size = 0
	for _, k := range slices.Sorted(maps.Keys(secret)) {
		size += len(k) + len(secret[k])
		if !slices.Contains(secretKeys, k) {
			errs = append(errs, fmt.Errorf("secret %s: key %q refused: want only %s", name, k, strings.Join(secretKeys, " and ")))
			continue
		}
		out[k] = string(secret[k])
	}
	if size > MaxConfigMapBytes {
		errs = append(errs, fmt.Errorf("secret %s: %d bytes of data, at most %d", name, size, MaxConfigMapBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseConfig reads the ConfigMap's and the Secret's data together
// (MergeData); every error names them (name, as "namespace/name"), the
// key and the field.
func ParseConfig(name string, data map[string]string) (*Config, error) {
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > MaxDataBytes {
		return nil, fmt.Errorf("configmap %s: %d bytes of data, at most %d", name, size, MaxDataBytes)
	}
	var missing []string
	for _, k := range []string{KeyScenario, KeyInventory, KeyRun} {
		if _, ok := data[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("configmap %s: missing key %q (want %s in the Secret, %s and %s in the ConfigMap)", name, missing[0], KeyScenario, KeyInventory, KeyRun)
	}
	c := &Config{}
	var errs []error
	if n := len(data[KeyRun]); n > MaxRunBytes {
		errs = append(errs, fmt.Errorf("configmap %s, key %s: %d bytes, at most %d", name, KeyRun, n, MaxRunBytes))
	} else if err := strictJSON([]byte(data[KeyRun]), &c.Run); err != nil {
		errs = append(errs, fmt.Errorf("configmap %s, key %s: %w", name, KeyRun, err))
	} else {
		c.Interval, err = checkRun(c.Run)
		if err != nil {
			errs = append(errs, fmt.Errorf("configmap %s, key %s: %w", name, KeyRun, err))
		}
	}
	sc, err := scenarios.Parse("configmap "+name+", key "+KeyScenario, []byte(data[KeyScenario]))
	if err != nil {
		errs = append(errs, err)
	} else {
		c.Scenario = sc
		if w := sc.Attack.Workers; w != 0 && c.Run.Workers != 0 && w != c.Run.Workers {
			errs = append(errs, fmt.Errorf("configmap %s: key %s says workers %d, key %s attack.workers %d: the coordinator wrote them from one run", name, KeyRun, c.Run.Workers, KeyScenario, w))
		}
	}
	if err := strictJSON([]byte(data[KeyInventory]), &c.Pods); err != nil {
		errs = append(errs, fmt.Errorf("configmap %s, key %s: want a JSON list of pods ({cluster, namespace, name, version, ...}): %w", name, KeyInventory, err))
	} else if err := checkPods(c.Pods, sc); err != nil {
		errs = append(errs, fmt.Errorf("configmap %s, key %s: %w", name, KeyInventory, err))
	}
	if pem, ok := data[KeyCA]; ok {
		// Certificates only, as the coordinator sends them: a key is
		// refused here too, and its bytes never reach a file or a record.
		if c.CA, err = certpem.Certificates([]byte(pem)); err != nil {
			errs = append(errs, fmt.Errorf("secret %s, key %s: %w", name, KeyCA, err))
		}
	}
	if c.Scenario != nil {
		wantCA := c.Scenario.Target.TLS != nil && c.Scenario.Target.TLS.CA != "" && !c.Scenario.Target.TLS.InsecureSkipVerify
		switch {
		case wantCA && c.CA == nil:
			errs = append(errs, fmt.Errorf("secret %s: key %s missing: the scenario's target.tls.ca (%s) is a file on the coordinator's machine, which sends its certificates in that key", name, KeyCA, c.Scenario.Target.TLS.CA))
		case !wantCA && data[KeyCA] != "":
			errs = append(errs, fmt.Errorf("secret %s: key %s given, but the scenario names no target.tls.ca to trust it for", name, KeyCA))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// checkRun validates run.json's fields and returns the interval.
func checkRun(r RunConfig) (time.Duration, error) {
	var errs []error
	switch {
	case r.RunID == "":
		errs = append(errs, errors.New("runId: required"))
	case len(r.RunID) > MaxRunIDBytes || !runIDRE.MatchString(r.RunID):
		errs = append(errs, fmt.Errorf("runId %q: want at most %d letters, digits, '-', '_' and '.'", r.RunID, MaxRunIDBytes))
	}
	if r.Workers < 1 || r.Workers > scenarios.MaxAttackWorkers {
		errs = append(errs, fmt.Errorf("workers %d: want 1 to %d", r.Workers, scenarios.MaxAttackWorkers))
	}
	if u, err := url.Parse(r.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("target %q: want an http(s) URL with a host, like http://web.demo.svc.cluster.local:8080/", r.Target))
	}
	d, err := time.ParseDuration(r.Interval)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("interval %q: want a duration like 2s", r.Interval))
	case d < MinInterval || d > MaxInterval:
		errs = append(errs, fmt.Errorf("interval %s: want %s to %s", d, MinInterval, MaxInterval))
	}
	return d, errors.Join(errs...)
}

func checkPods(pods []kube.Pod, sc *scenarios.Scenario) error {
	if len(pods) > MaxInventoryPods {
		return fmt.Errorf("%d pods, at most %d", len(pods), MaxInventoryPods)
	}
	for i, p := range pods {
		switch {
		case p.Cluster == "":
			return fmt.Errorf("[%d].cluster: required", i)
		case p.Name == "":
			return fmt.Errorf("[%d].name: required", i)
		case sc != nil && !slices.Contains(sc.ClusterNames(), p.Cluster):
			return fmt.Errorf("[%d].cluster: %q is not a cluster of the scenario", i, p.Cluster)
		}
	}
	return nil
}

// strictJSON decodes one JSON value, refusing unknown fields, a key given
// twice in one object and trailing data: the coordinator and the worker
// are the same version, so a field the worker does not know is a mistake,
// not a newer format; and of a key given twice encoding/json keeps the
// last silently, so a run.json could say one thing to a reviewer and
// another to the worker.
func strictJSON(data []byte, v any) error {
	if err := uniqueKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty")
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// uniqueKeys fails on the first object of data that holds a key twice,
// comparing keys as encoding/json matches them to fields (case-folded);
// data that is not JSON is left to the decoder to report.
func uniqueKeys(data []byte) error {
	// frame is one open object (keys set) or array (keys nil).
	type frame struct {
		keys     map[string]bool
		keyFirst bool // in an object: the next token is a key
	}
	var stack []*frame
	// valueDone: a value ended; in an object, a key comes next.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].keyFirst = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, keyFirst: true})
			case '[':
				stack = append(stack, &frame{})
			default: // '}' or ']'
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if top != nil && top.keys != nil && top.keyFirst {
				k := foldKey(t)
				if top.keys[k] {
					return fmt.Errorf("key %q given twice in one object (before byte %d)", t, dec.InputOffset())
				}
				top.keys[k] = true
				top.keyFirst = false
				continue
			}
		}
		valueDone()
	}
}

// foldKey maps a key to one representative of its case-folding class,
// so that keys encoding/json would match to the same field compare equal
// (it matches case-insensitively, with Unicode's simple folding).
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		b.WriteRune(low)
	}
	return b.String()
}

// Share is worker index's part of the run: the scenario with its attack
// divided (scenarios.Attack.WorkerShare) and the request ids' prefix.
func (c *Config) Share(index int) (*scenarios.Scenario, string, error) {
	if index < 0 || index >= c.Run.Workers {
		return nil, "", fmt.Errorf("worker index %d: want 0 to %d (run.json workers %d)", index, c.Run.Workers-1, c.Run.Workers)
	}
	a, err := c.Scenario.Attack.WorkerShare(index, c.Run.Workers)
	if err != nil {
		return nil, "", err
	}
	sc := *c.Scenario
	sc.Attack = a
	return &sc, fmt.Sprintf("%s-w%d", c.Run.RunID, index), nil
}

// RunData is the data of a worker's ConfigMap and Secret together, keyed
// like both (SplitData parts them), as the coordinator writes them
// (kube.WorkerSpec.ConfigMapData and SecretData): the resolved scenario as
// YAML, the pods and run.json.
func RunData(scenarioYAML []byte, pods []kube.Pod, run RunConfig) (map[string]string, error) {
	if pods == nil {
		pods = []kube.Pod{}
	}
	inv, err := json.Marshal(pods)
	if err != nil {
		return nil, fmt.Errorf("encode inventory: %w", err)
	}
	rc, err := json.Marshal(run)
	if err != nil {
		return nil, fmt.Errorf("encode run.json: %w", err)
	}
	spec := kube.WorkerSpec{Scenario: scenarioYAML, Inventory: inv, Run: rc}
	data := spec.ConfigMapData()
	for k, v := range spec.SecretData() {
		data[k] = string(v)
	}
	return data, nil
}

// SplitData parts RunData's map into the ConfigMap's data and the
// Secret's, as MergeData wants them: a key of neither goes to the
// ConfigMap (and MergeData refuses it).
func SplitData(data map[string]string) (cm map[string]string, secret map[string][]byte) {
	cm, secret = map[string]string{}, map[string][]byte{}
	for k, v := range data {
		if slices.Contains(secretKeys, k) {
			secret[k] = []byte(v)
		} else {
			cm[k] = v
		}
	}
	return cm, secret
}
