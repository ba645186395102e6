package runlog

import "io"

// NewOn records to the given writers instead of a directory's files, for
// tests that break the disk.
func NewOn(results, attribution io.WriteCloser, opts ...Option) *Recorder {
	return newRecorder(results, attribution, opts...)
}
