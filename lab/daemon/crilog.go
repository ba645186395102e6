package daemon

import (
	"fmt"
	"strings"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
)

// entryLog is the log of a mesh entry pod (a router or gateway, which
// lab/apps does not run): what `kubectl logs` of the router shows —
// its policy and every change of its backends — written in the CRI format
// kwok's kubelet reads by lab/apps' writer.
type entryLog struct{ log *crilog.Log }

func openEntryLog(path string) (*entryLog, error) {
	l, err := crilog.Open(path)
	if err != nil {
		return nil, err
	}
	return &entryLog{log: l}, nil
}

// newlinesToSpaces keeps an entry line on one line.
var newlinesToSpaces = strings.NewReplacer("\n", " ", "\r", " ")

// Line appends one formatted line; a failed write only loses that line.
func (l *entryLog) Line(format string, args ...any) {
	_ = l.log.Line(newlinesToSpaces.Replace(fmt.Sprintf(format, args...)))
}

// Raw appends one line as given: an Envoy access line of a gateway pod.
func (l *entryLog) Raw(msg string) { _ = l.log.Line(msg) }

func (l *entryLog) Close() error { return l.log.Close() }
