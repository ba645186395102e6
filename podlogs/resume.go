package podlogs

import "time"

// lookback is how far before the newest delivered line's second a stream
// reopens. The runtime timestamps stdout and stderr records in separate
// goroutines, so a record may land in the file after a newer one; reopening
// one second earlier still replays such a late line when it straddles a
// second boundary, instead of the kubelet's sinceTime filter dropping it.
// It is one second because the counts in position.delivered rely on it.
const lookback = time.Second

// position is where a stream resumes. PodLogOptions.SinceTime travels with
// one-second resolution (the API server formats it as RFC3339), and the
// kubelet replays every record whose timestamp is not before it, in file
// order (cri-client logs.ReadLogs). Reopening at a second S therefore
// replays, first, exactly the delivered lines whose timestamps are not
// before S, and then the new ones: skipping that many lines is exact even
// when many lines share a second or a timestamp, which comparing timestamps
// alone cannot tell apart. S is the newest line's second minus lookback; the
// counts for it are kept incrementally, so the state stays this small.
type position struct {
	since time.Time // second of the newest delivered line
	seen  int       // delivered lines not before since
	back  int       // delivered lines not before since−lookback
	last  time.Time // newest delivered timestamp
	skip  int       // replayed lines still to skip in the current stream
}

// reopen starts a replay and returns the sinceTime to ask for: lines before
// it are not part of the replay (nor of the window, before from).
func (p *position) reopen(from time.Time) time.Time {
	p.skip = p.back
	if p.since.IsZero() {
		return from
	}
	if s := p.since.Add(-lookback); s.After(from) {
		return s
	}
	return from
}

// replayed reports whether the next line, with timestamp ts, is one
// already delivered. diverged is set when the replay turned out shorter
// than counted: the line is newer than anything delivered, so the log is no
// longer the one the position describes — the container was replaced (its
// follow stream ended and the reopen reached the new one), or the log was
// rotated, and the kubelet does not read the rotated file. A new line is
// never skipped for it.
func (p *position) replayed(ts time.Time) (replayed, diverged bool) {
	if p.skip == 0 {
		return false, false
	}
	if ts.After(p.last) {
		p.skip = 0
		return false, true
	}
	p.skip--
	return true, false
}

// delivered records that a line with timestamp ts was handed on.
func (p *position) delivered(ts time.Time) {
	sec := ts.Truncate(time.Second)
	switch {
	case sec.After(p.since):
		// since was the newest line's second, so every line delivered
		// before is older than sec; those not before sec−lookback are the
		// ones of the old since when it is exactly the previous second.
		back := 1
		if sec.Equal(p.since.Add(lookback)) {
			back += p.seen
		}
		p.since, p.seen, p.back = sec, 1, back
	case !ts.Before(p.since):
		p.seen++
		p.back++
	case !ts.Before(p.since.Add(-lookback)):
		p.back++ // a late line, still inside the replay
	default:
		// Later than a second late: a reopen will not replay it, so it is
		// not counted (and, had the stream been cut just before it, it
		// would have been lost: a limit of sinceTime's resolution).
	}
	if ts.After(p.last) {
		p.last = ts
	}
}

// newContainer is called once the previous container's log was read to its
// end: the current container's log is another file, none of whose lines was
// delivered, so nothing of it is to be skipped. since and last stay: its
// lines are newer.
func (p *position) newContainer() {
	p.seen, p.back, p.skip = 0, 0, 0
}
