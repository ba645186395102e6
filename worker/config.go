// Package worker is `mesh-verify worker`, one pod of a distributed run
// (docs/distributed.md, The worker): it reads its ConfigMap, prints a
// ready record, waits for the coordinator's start signal, attacks its
// share of the scenario with the runner's own attack, sink and tally, and
// prints its cumulative state as fleet records on stdout.
//
// It is a package of its own rather than part of fleet: fleet is the
// coordinator's reading and merging of records and stays free of the
// attack, Kubernetes and runner code a worker needs.
package worker

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// The ConfigMap's keys and annotations (docs/distributed.md, The worker):
// kube's, which writes them when it creates the ConfigMap.
const (
	KeyScenario  = kube.WorkerKeyScenario
	KeyInventory = kube.WorkerKeyInventory
	KeyRun       = kube.WorkerKeyRun
	// KeyCA is the optional PEM of the scenario's target.tls.ca.
	KeyCA = kube.WorkerKeyCA
	// AnnotationStartAt is the instant (RFC 3339 with nanoseconds) every
	// worker starts its attack at; the coordinator sets it once all are ready.
	AnnotationStartAt = kube.AnnotationStartAt
	// AnnotationStop "true" stops the attack: final record, exit 0.
	AnnotationStop = kube.AnnotationStop
)

// Limits on what a ConfigMap may say, each checked by ParseConfig.
const (
	// MaxConfigMapBytes is Kubernetes' own bound on a ConfigMap.
	MaxConfigMapBytes = 1 << 20
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

// Config is a worker's ConfigMap, read and checked.
type Config struct {
	// Scenario is the resolved scenario (--set applied), its attack not
	// yet divided (Share does that).
	Scenario *scenarios.Scenario
	// Pods are the pods of every cluster of the scenario, for attribution.
	Pods     []kube.Pod
	Run      RunConfig
	Interval time.Duration
	// CA is ca.pem: the authorities the scenario's target.tls.ca names,
	// read by the coordinator (nil when it names none).
	CA []byte
}

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// ParseConfig reads the ConfigMap's data; every error names the ConfigMap
// (name, as "namespace/name"), the key and the field.
func ParseConfig(name string, data map[string]string) (*Config, error) {
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > MaxConfigMapBytes {
		return nil, fmt.Errorf("configmap %s: %d bytes of data, at most %d", name, size, MaxConfigMapBytes)
	}
	var missing []string
	for _, k := range []string{KeyScenario, KeyInventory, KeyRun} {
		if _, ok := data[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("configmap %s: missing key %q (want %s, %s and %s)", name, missing[0], KeyScenario, KeyInventory, KeyRun)
	}
	c := &Config{}
	var errs []error
	if err := strictJSON([]byte(data[KeyRun]), &c.Run); err != nil {
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
		c.CA = []byte(pem)
		if !x509.NewCertPool().AppendCertsFromPEM(c.CA) {
			errs = append(errs, fmt.Errorf("configmap %s, key %s: holds no PEM certificate", name, KeyCA))
		}
	}
	if c.Scenario != nil {
		wantCA := c.Scenario.Target.TLS != nil && c.Scenario.Target.TLS.CA != "" && !c.Scenario.Target.TLS.InsecureSkipVerify
		switch {
		case wantCA && c.CA == nil:
			errs = append(errs, fmt.Errorf("configmap %s: key %s missing: the scenario's target.tls.ca (%s) is a file on the coordinator's machine, which sends its certificates in that key", name, KeyCA, c.Scenario.Target.TLS.CA))
		case !wantCA && c.CA != nil:
			errs = append(errs, fmt.Errorf("configmap %s: key %s given, but the scenario names no target.tls.ca to trust it for", name, KeyCA))
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

// strictJSON decodes one JSON value, refusing unknown fields and trailing
// data: the coordinator and the worker are the same version, so a field
// the worker does not know is a mistake, not a newer format.
func strictJSON(data []byte, v any) error {
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

// ConfigMapData is the data of a worker ConfigMap, as the coordinator
// writes it (kube.WorkerSpec.ConfigMapData): the resolved scenario as
// YAML, the pods and run.json.
func ConfigMapData(scenarioYAML []byte, pods []kube.Pod, run RunConfig) (map[string]string, error) {
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
	return kube.WorkerSpec{Scenario: scenarioYAML, Inventory: inv, Run: rc}.ConfigMapData(), nil
}
