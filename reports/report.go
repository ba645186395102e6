// Package reports holds the run report (a versioned JSON document) and
// renders it for people and CI systems: terminal tables, JSON, JUnit XML and
// Markdown. Every renderer reads only the Report, so saved runs re-render
// exactly as they were judged.
package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
)

// Schema identifies the report format; bump it on any incompatible change.
const Schema = "mesh-verify.io/report/v1"

// Report is everything a run measured and decided.
type Report struct {
	Schema string `json:"schema"`
	RunID  string `json:"runId"`
	// Tool is the build that ran, and Command how it was invoked: with the
	// scenario beside report.json, what it takes to reproduce the run.
	Tool        Tool           `json:"tool,omitzero"`
	Command     []string       `json:"command,omitempty"`
	Scenario    ScenarioInfo   `json:"scenario"`
	Target      string         `json:"target"`
	Attack      AttackInfo     `json:"attack"`
	Metrics     Metrics        `json:"metrics"`
	Dimensions  []Dimension    `json:"dimensions"`
	Samples     []string       `json:"unattributedSamples,omitempty"`
	Timeline    Timeline       `json:"timeline"`
	Statistics  StatisticsInfo `json:"statistics"`
	Expectation []Expectation  `json:"expectations"`
	Sequential  *Sequential    `json:"sequential,omitempty"`
	Verdict     assert.Verdict `json:"verdict"`
	// Gate is the verdict after the scenario's rule for INCONCLUSIVE.
	Gate     assert.Verdict `json:"gate"`
	ExitCode int            `json:"exitCode"`
	Warnings []string       `json:"warnings,omitempty"`
	// ConfigErrors are mistakes of the scenario that the run revealed: a
	// rule that matched nothing, a field captured empty. The exit code is
	// then 4, whatever the verdicts.
	ConfigErrors []ConfigError `json:"configErrors,omitempty"`
	// Rules says what each attribution rule and log rule matched.
	Rules []RuleReport `json:"rules,omitempty"`
	// Reconciliation compares what each counting source (logs, metrics)
	// counted with the requests the attack got answered.
	Reconciliation []Reconciliation `json:"reconciliation,omitempty"`
	// Kubernetes describes the clusters, pods and tunnel of the run.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// Workers is a distributed run's fleet (attack.workers,
	// docs/distributed.md): where its Job ran and what each worker sent.
	Workers *Workers `json:"workers,omitempty"`
	// SetupError is set when the run could not measure what it was asked to.
	SetupError string `json:"setupError,omitempty"`
	// Failure says why a run ended without judging the mesh: a setup
	// error, bad input found after the run directory was made, or an
	// interrupt before the attack. Such a run still writes every file, so
	// a CI step reads the cause where it reads a verdict.
	Failure *Failure `json:"failure,omitempty"`
	// Converge lists every attempt of run --converge N --within D; the
	// report is the last attempt's, its exitCode the gate's.
	Converge *Converge `json:"converge,omitempty"`
}

// Failure kinds: what ended a run that judged nothing.
const (
	FailureSetup       = "setup"
	FailureInput       = "input"
	FailureInterrupted = "interrupted"
)

// Failure phases: how far the run got.
const (
	// PhasePrepare is before the first request: connecting to the
	// clusters, starting the workers, reaching the target.
	PhasePrepare = "prepare"
	// PhaseAttack is the attack and what follows it (nothing answered,
	// access to the clusters' logs or metrics refused).
	PhaseAttack = "attack"
)

// Failure is why a run ended without a verdict on the mesh.
type Failure struct {
	// Kind is setup, input or interrupted; ExitCode the run's.
	Kind     string `json:"kind"`
	ExitCode int    `json:"exitCode"`
	// Phase is prepare (before the first request) or attack.
	Phase string `json:"phase"`
	// Error is the whole message; Cause its innermost error (the same
	// text when there is no chain). Both are redacted.
	Error string `json:"error"`
	Cause string `json:"cause,omitempty"`
}

// Workers are the Jobs a distributed run attacked from: one per source
// cluster, numbering the run's workers in order.
type Workers struct {
	Image string      `json:"image"`
	Count int         `json:"count"`
	Jobs  []WorkerJob `json:"jobs"`
	Rows  []WorkerRow `json:"rows"`
}

// WorkerJob is one source's Job: workers FirstIndex to
// FirstIndex+Workers-1.
type WorkerJob struct {
	Cluster    string `json:"cluster"`
	Namespace  string `json:"namespace"`
	Job        string `json:"job"`
	Workers    int    `json:"workers"`
	FirstIndex int    `json:"firstIndex"`
}

// WorkerRow is one worker: its requests as of its last record.
type WorkerRow struct {
	Index int `json:"index"`
	// Cluster is the source the worker ran in.
	Cluster  string `json:"cluster,omitempty"`
	Pod      string `json:"pod,omitempty"`
	Requests int64  `json:"requests"`
	Errors   int64  `json:"errors"`
	// Rate is the requests per second it achieved, Share its part of
	// all workers' requests.
	Rate  float64 `json:"rate"`
	Share float64 `json:"share"`
	// Final: its last record was the final one, so every request it sent
	// is counted. Error says why not, or how it failed.
	Final bool   `json:"final"`
	Error string `json:"error,omitempty"`
}

// Tool identifies the build of mesh-verify that made the report.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Go and Vegeta are the toolchain and attack engine versions.
	Go     string `json:"go,omitempty"`
	Vegeta string `json:"vegeta,omitempty"`
}

// ScenarioInfo identifies the scenario judged.
type ScenarioInfo struct {
	Name        string `json:"name"`
	File        string `json:"file,omitempty"`
	Description string `json:"description,omitempty"`
}

// AttackInfo is how load was generated and how the generator kept up.
type AttackInfo struct {
	attack.Summary
	Mode           string `json:"mode"` // open-loop, closed-loop, ramp
	Concurrency    int    `json:"concurrency,omitempty"`
	KeepAlive      bool   `json:"keepAlive"`
	MaxConnections int    `json:"maxConnections,omitempty"`
	HTTP2          bool   `json:"http2"`
	Method         string `json:"method"`
	// GRPC is the method of attack.grpc's unary calls
	// (/package.Service/Method); empty for plain HTTP requests.
	GRPC string `json:"grpc,omitempty"`
}

// Metrics are the request outcomes.
type Metrics struct {
	Requests    int64            `json:"requests"`
	Successes   int64            `json:"successes"`
	Success     float64          `json:"success"`
	StatusCodes map[string]int   `json:"statusCodes"`
	Errors      []ErrorCount     `json:"errors,omitempty"`
	Latency     Latency          `json:"latency"`
	BytesIn     uint64           `json:"bytesIn"`
	Extra       map[string]int64 `json:"extra,omitempty"`
}

// ErrorCount is one kind of failure.
type ErrorCount struct {
	Message string `json:"message"`
	Count   int64  `json:"count"`
}

// Latency percentiles.
type Latency struct {
	Mean time.Duration `json:"mean"`
	P50  time.Duration `json:"p50"`
	P90  time.Duration `json:"p90"`
	P95  time.Duration `json:"p95"`
	P99  time.Duration `json:"p99"`
	Max  time.Duration `json:"max"`
}

// Dimension is the observed split over one identity field, as one source
// (body, logs, metrics) saw it.
type Dimension struct {
	Name         string   `json:"name"`
	Source       string   `json:"source"`
	Buckets      []Bucket `json:"buckets"`
	Attributed   int64    `json:"attributed"`
	Unattributed int64    `json:"unattributed"`
	// ErrorsUnattributed counts failed requests no rule could place.
	ErrorsUnattributed int64 `json:"errorsUnattributed,omitempty"`
	// Units is the number of sampling units (connections) behind the counts.
	Units int64 `json:"units"`
	// Sums are the per-connection sufficient statistics of the answered
	// counts, in the order of Buckets (only buckets with a count): what
	// the connection-aware variance needs, so two saved runs can be
	// compared and partial runs merged (docs/statistics.md §3).
	Sums *assert.UnitStats `json:"sums,omitempty"`
}

// Bucket is one cluster, pod or version.
type Bucket struct {
	// Name is the value; a pod's is "cluster/pod" when its cluster is
	// known, so that web-0 of c1 and web-0 of c2 are two buckets.
	Name string `json:"name"`
	// Cluster is the cluster of a pod bucket: pod names repeat across
	// clusters, so a pod is shown as cluster/pod.
	Cluster string `json:"cluster,omitempty"`
	// Count is the answered requests attributed to it; Share its share of
	// them; Errors the failed requests attributed to it.
	Count  int64   `json:"count"`
	Share  float64 `json:"share"`
	Errors int64   `json:"errors,omitempty"`
	// Sources says which attribution sources saw this bucket (body, logs, metrics).
	Sources []string `json:"sources,omitempty"`
}

// Timeline is the per-slice view of the attack.
type Timeline struct {
	SliceWidth time.Duration `json:"sliceWidth"`
	Slices     []Slice       `json:"slices"`
}

// Slice is one time window.
type Slice struct {
	Start    time.Duration `json:"start"`
	Requests int64         `json:"requests"`
	Errors   int64         `json:"errors"`
	// Clusters counts the answered requests per serving cluster, as the
	// responses say.
	Clusters map[string]int64 `json:"clusters,omitempty"`
	// Sources counts, per other source (logs), the requests each cluster's
	// pods logged served in the window, so a scale-down or a failover
	// shows where it happened even when responses name no cluster.
	Sources map[string]map[string]int64 `json:"sources,omitempty"`
	// Latency is the window's latency per serving cluster, "(failed)" for
	// failed requests and "(unattributed)" for answers no rule placed.
	Latency map[string]SliceLatency `json:"latency,omitempty"`
}

// SliceLatency summarises the latencies of one series in one window;
// percentiles come from a log-linear histogram (±12.5%).
type SliceLatency struct {
	N   int64         `json:"n"`
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// StatisticsInfo records the settings the verdicts used.
type StatisticsInfo struct {
	Confidence   float64 `json:"confidence"`
	Power        float64 `json:"power"`
	Margin       float64 `json:"margin"`
	Relative     bool    `json:"relative"`
	Interval     string  `json:"interval"`
	Inconclusive string  `json:"inconclusive"`
	Stop         string  `json:"stop"`
	// Balancing is the sampling unit assumed (request or connection) and
	// BalancingReason why (docs/statistics.md §3).
	Balancing       string `json:"balancing"`
	BalancingReason string `json:"balancingReason,omitempty"`
}

// Expectation is one judged statement with its evidence.
type Expectation struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	By     string `json:"by,omitempty"`
	Source string `json:"source,omitempty"`
	// From is the source cluster whose workers' requests alone were
	// judged (attack.sources).
	From    string              `json:"from,omitempty"`
	Verdict assert.Verdict      `json:"verdict"`
	Reason  string              `json:"reason"`
	Model   *assert.Shares      `json:"model,omitempty"`
	Split   *assert.SplitResult `json:"split,omitempty"`
	// Windows is a split judged over time (split.windows).
	Windows *Windows       `json:"windows,omitempty"`
	Result  *assert.Result `json:"result,omitempty"`
	// Confidence is the level the verdict was judged at: the
	// expectation's own, or with early stopping its spending level at
	// the look that decided (docs/statistics.md §6).
	Confidence float64 `json:"confidence,omitempty"`
	// Planned is the draws (PlannedUnit: requests, connections, or the
	// mirror's primaries) at which a correct mesh passes with the
	// scenario's power, as `mesh-verify plan` computes it: "n needed" to
	// set beside the n the run judged (split and mirror expectations).
	Planned     int64  `json:"planned,omitempty"`
	PlannedUnit string `json:"plannedUnit,omitempty"`
	// Advice is what would settle an INCONCLUSIVE verdict: requiredN
	// requests in total, or requiredConnections when the attack's
	// keep-alive connections limit the evidence.
	assert.Advice
}

// Sequential records early stopping.
type Sequential struct {
	Plan      assert.SequentialPlan `json:"plan"`
	StoppedAt int                   `json:"stoppedAtLook"` // 1-based; 0 = ran to the end
	Rule      string                `json:"rule"`
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// MaxReportSize bounds a report.json read back (`report`, `report
// diff`): a run of a million requests writes well under a megabyte (a
// dimension keeps at most tally.MaxBuckets buckets), so this is far beyond
// any real one. A larger file, or one that is not a regular file, is
// refused before it is read.
const MaxReportSize = 64 << 20

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(path string) (*Report, error) {
	b, err := boundedfile.Read(path, MaxReportSize, "a report")
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	return DecodeJSON(path, b)
}

// DecodeJSON decodes a report; name is the file, for messages.
func DecodeJSON(name string, b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", name, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("read report %s: schema %q, this build reads %q", name, r.Schema, Schema)
	}
	return &r, nil
}

// FileMode is the mode every file of a run directory is created with,
// less the umask, as results.bin is (runlog), as any command-line tool
// creates files: CI artifact uploaders and web servers running as another
// user read the reports under the usual umask 022, and a umask of 077
// keeps them private. No credential is in them: everything written is
// redacted.
const FileMode = 0o666

// WriteFile writes the report into dir/name atomically: a half-written
// report must never be mistaken for a complete one. The file gets
// FileMode less the umask.
func WriteFile(dir, name string, render func(io.Writer) error) (string, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil { // less the umask
		return "", fmt.Errorf("create run directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, name)
	f, err := createHonouringUmask(dir, name)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := render(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// createHonouringUmask creates a fresh temporary file beside name, mode
// 0666 less the process's umask like every other file of the run
// (results.bin, attribution.jsonl): os.CreateTemp makes 0600 files, which
// CI artifact uploaders and web servers running as another user could not
// read. Credentials never reach these files (they are redacted), so the
// umask, not this code, decides who reads them (README.md, "The run
// directory").
func createHonouringUmask(dir, name string) (*os.File, error) {
	for range 100 {
		p := filepath.Join(dir, "."+name+"."+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("no free temporary name for %s in %s", name, dir)
}

// Kubernetes is what the run saw of the clusters.
type Kubernetes struct {
	Clusters []KubeCluster `json:"clusters"`
	// Inventory is the observed pods per cluster at the start.
	Inventory any `json:"inventory,omitempty"`
	// Tunnel is the port-forward to the entry point.
	Tunnel any `json:"tunnel,omitempty"`
	// Logs are the per-stream statistics of the pod-log followers.
	Logs []LogStream `json:"logs,omitempty"`
}

// KubeCluster is one cluster of the run.
type KubeCluster struct {
	Name    string `json:"name"`
	Context string `json:"context"`
	Server  string `json:"server"`
}

// LogStream is one followed container log.
type LogStream struct {
	Target     string `json:"target"`
	Lines      int64  `json:"lines"`
	Reconnects int64  `json:"reconnects"`
	LastError  string `json:"lastError,omitempty"`
	// Deleted is set for a pod deleted during the run: it was read until
	// its container stopped.
	Deleted bool `json:"deleted,omitempty"`
}

// ConfigError is a mistake of the scenario that only running it showed.
type ConfigError struct {
	// Subject names what is wrong, like "observe[0] (callme) logs.match".
	Subject string `json:"subject"`
	Message string `json:"message"`
	// Samples are what it did not match or captured empty (as read).
	Samples []string `json:"samples,omitempty"`
}

// RuleReport is what one rule matched: an attribution rule over the
// answered responses, or a workload's log rule over the lines read.
type RuleReport struct {
	Source string `json:"source"` // body or logs
	Rule   string `json:"rule"`
	// Read counts the answered responses or the log lines it was tried on.
	Read     int64 `json:"read"`
	Matched  int64 `json:"matched"`
	Excluded int64 `json:"excluded,omitempty"`
	// Samples are responses or lines it did not match.
	Samples []string `json:"samples,omitempty"`
}

// Reconciliation statuses.
const (
	ReconcileOK    = "ok"
	ReconcileOver  = "over"
	ReconcileUnder = "under"
)

// Reconciliation compares one counting source with the requests answered.
type Reconciliation struct {
	Source string `json:"source"`
	// Answered and Failed are the attack's requests by attack.successCodes.
	Answered int64 `json:"answered"`
	Failed   int64 `json:"failed"`
	// Counted is the requests the source counts served, less background.
	Counted float64 `json:"counted"`
	// Background is the background taken out of the window's lines.
	Background float64 `json:"background"`
	// Tolerance is 3σ of the background's Poisson noise plus slack.
	Tolerance float64 `json:"tolerance"`
	// Copies counts mirrored copies, which are not served requests.
	Copies float64 `json:"copies,omitempty"`
	// Retried counts the requests logged once per attempt (a retry: the
	// same request id more than once in a workload's logs), each counted
	// once; Attempts the lines beyond each one's first.
	Retried  int64 `json:"retried,omitempty"`
	Attempts int64 `json:"attempts,omitempty"`
	// CountsAttempts is set when some lines carry no request id: those
	// count attempts, not requests (a retried request counts once per
	// attempt that reached an observed pod).
	CountsAttempts bool `json:"countsAttempts,omitempty"`
	// Status is ok, over (more than was sent and failed) or under (fewer
	// than answered); Reason says what that means.
	Status string              `json:"status"`
	Reason string              `json:"reason,omitempty"`
	Pods   []PodReconciliation `json:"pods,omitempty"`
}

// PodReconciliation is one pod's part of a source's count.
type PodReconciliation struct {
	Cluster  string `json:"cluster"`
	Pod      string `json:"pod"`
	Workload string `json:"workload,omitempty"`
	// Mode is "request id" (joined to the run's requests) or "window"
	// (lines counted in the attack window), or "counter" for metrics.
	Mode string `json:"mode"`
	// Lines counts the requests (by id) or lines (in the window).
	Lines int64 `json:"lines"`
	// BackgroundLines were logged in the BackgroundSeconds before the
	// window; Rate and Expected are the background per second and in the
	// window.
	BackgroundLines   int64   `json:"backgroundLines,omitempty"`
	BackgroundSeconds float64 `json:"backgroundSeconds,omitempty"`
	Rate              float64 `json:"rate,omitempty"`
	Expected          float64 `json:"expected,omitempty"`
	// Net is what the pod counts served; Copies and Errors its mirrored
	// copies and failed requests.
	Net    float64 `json:"net"`
	Copies float64 `json:"copies,omitempty"`
	Errors float64 `json:"errors,omitempty"`
}
