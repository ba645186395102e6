package fleet

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Merger keeps the latest cumulative record of every worker and merges
// their states. A record whose seq is not above the last one taken from
// that worker is ignored, so a log line read twice (podlogs re-reads
// after a reconnect) counts once. Not safe for concurrent use: the
// coordinator feeds it from one goroutine.
type Merger struct {
	acc     *tally.Accumulator
	workers map[int]*worker
}

type worker struct {
	pod      string
	seq      int64
	lastSeen time.Time
	final    bool
	err      string
	state    *tally.State
	rules    *attribution.Stats
	engine   string
}

// NewMerger merges states whose time slices start at start, the start
// the workers were given.
func NewMerger(start time.Time) *Merger {
	return &Merger{acc: tally.NewAccumulator(start), workers: map[int]*worker{}}
}

// Add takes a record; accepted is false for a record already seen (its
// seq is not above the worker's last). A record that did not come from a
// Decoder (which validates what it returns) is validated here. Its state
// is kept and must not be changed afterwards.
func (m *Merger) Add(rec Record) (accepted bool, err error) {
	if !rec.checked {
		if err := rec.Validate(); err != nil {
			return false, fmt.Errorf("merge record %d of worker %d: %w", rec.Seq, rec.Worker, err)
		}
	}
	w, known := m.workers[rec.Worker]
	if known && rec.Seq <= w.seq {
		return false, nil
	}
	if !known {
		w = &worker{}
		m.workers[rec.Worker] = w
	}
	w.seq, w.lastSeen = rec.Seq, rec.Time
	if rec.Pod != "" {
		w.pod = rec.Pod
	}
	switch rec.Kind {
	case KindFinal:
		w.final = true
	case KindError:
		w.err = rec.Error
	}
	if rec.State != nil {
		w.state = rec.State
		m.acc.Put(rec.Worker, rec.State)
	}
	if rec.Rules != nil {
		w.rules = rec.Rules
	}
	if rec.Engine != "" {
		w.engine = rec.Engine
	}
	return true, nil
}

// Total is the requests of the workers' latest states, without a merge.
func (m *Merger) Total() int64 { return m.acc.Total() }

// Rules merges the workers' latest rule statistics (records of format
// v1.1); nil when no worker sent any.
func (m *Merger) Rules() *attribution.Stats {
	idx := make([]int, 0, len(m.workers))
	for i, w := range m.workers {
		if w.rules != nil {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	sort.Ints(idx) // the samples kept are the lowest workers'
	var s attribution.Stats
	for _, i := range idx {
		s.Add(*m.workers[i].rules)
	}
	return &s
}

// Engine is the attack engine the workers' final records name: one name
// when they agree, the names sorted and joined by "+" when they do not
// (workers of different versions), "" when none said (records older than
// v1.2, or no final record).
func (m *Merger) Engine() string {
	var names []string
	for _, w := range m.workers {
		if w.engine != "" && !slices.Contains(names, w.engine) {
			names = append(names, w.engine)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "+")
}

// Snapshot merges the workers' latest states.
func (m *Merger) Snapshot() tally.Snapshot { return m.acc.Snapshot() }

// WorkerRow is one worker in the report's per-worker table.
type WorkerRow struct {
	Index    int     `json:"index"`
	Pod      string  `json:"pod,omitempty"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"` // failed requests
	Rate     float64 `json:"rate"`   // requests per second achieved, as vegeta computes it
	Share    float64 `json:"share"`  // of all workers' requests
	// LastSeen is the time of the worker's last record.
	LastSeen time.Time `json:"lastSeen"`
	Final    bool      `json:"final"`
	Error    string    `json:"error,omitempty"`
}

// Workers lists every worker a record came from, by index.
func (m *Merger) Workers() []WorkerRow {
	var total int64
	for _, w := range m.workers {
		if w.state != nil {
			total += w.state.Total
		}
	}
	rows := make([]WorkerRow, 0, len(m.workers))
	for i, w := range m.workers {
		r := WorkerRow{Index: i, Pod: w.pod, LastSeen: w.lastSeen, Final: w.final, Error: w.err}
		if s := w.state; s != nil {
			r.Requests = s.Total
			oc := s.Dimensions[tally.Outcome]
			for k, b := range oc.Buckets {
				if b == tally.Failure {
					r.Errors = oc.N[k]
				}
			}
			if d := s.Latest.Sub(s.Earliest).Seconds(); d > 0 {
				r.Rate = float64(s.Total) / d
			}
			if total > 0 {
				r.Share = float64(s.Total) / float64(total)
			}
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(a, b int) bool { return rows[a].Index < rows[b].Index })
	return rows
}
