package kwok

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// PortConflictError is a cluster whose component could not bind the port
// kwokctl chose for it: kwokctl picks free ports without reserving them
// (tools/lab/NOTES.md), so another process — often the kwok controller
// of a cluster being restarted — can take one before the component starts.
type PortConflictError struct {
	Cluster   string
	Component string // kube-apiserver, etcd, kwok-controller…
	Port      int
	// Holder names the process listening on Port now ("" if unknown).
	Holder string
	// Attempts is how many creates found a conflict.
	Attempts int
}

func (e *PortConflictError) Error() string {
	holder := "another process"
	if e.Holder != "" {
		holder = e.Holder
	}
	msg := fmt.Sprintf("lab cluster %s: port %d that kwokctl chose for %s was taken by %s before %s could bind it (kwokctl picks free ports without reserving them)",
		e.Cluster, e.Port, e.Component, holder, e.Component)
	if e.Attempts > 1 {
		msg += fmt.Sprintf("; created %d times, a conflict every time", e.Attempts)
	}
	return msg
}

// bindFailure is what Go components (etcd, the kube binaries, kwok) log
// when their listener's port is taken.
var bindFailure = regexp.MustCompile(`listen tcp [^\s"]*:(\d+): bind: address already in use`)

// findPortConflict looks through the component logs of a cluster being
// created (kwokctl's clusters/<name>/logs/<component>.log) for a listener
// that could not bind, and names the process holding the port now.
func findPortConflict(clusterDir, cluster string) *PortConflictError {
	logs, _ := filepath.Glob(filepath.Join(clusterDir, "logs", "*.log"))
	sort.Strings(logs)
	for _, f := range logs {
		b, err := readTail(f, 64<<10)
		if err != nil {
			continue
		}
		m := bindFailure.FindSubmatch(b)
		if m == nil {
			continue
		}
		port, err := strconv.Atoi(string(m[1]))
		if err != nil || port <= 0 || port > 65535 {
			continue
		}
		return &PortConflictError{
			Cluster: cluster, Component: strings.TrimSuffix(filepath.Base(f), ".log"), Port: port,
			Holder: PortHolder(port),
		}
	}
	return nil
}

// readTail reads at most the last n bytes of a file.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := st.Size() - n; off > 0 {
		if _, err := f.Seek(off, 0); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// PortHolder names the process listening on a TCP port of this machine,
// "pid N (ARGS)", or "" when none is found (gone, or not visible).
func PortHolder(port int) string {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, in := range listeningInodes(b, port) {
			inodes[in] = true
		}
	}
	if len(inodes) == 0 {
		return ""
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", e.Name(), "fd"))
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", e.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
				if p, ok := ReadProc(pid); ok {
					return fmt.Sprintf("pid %d (%s)", pid, strings.Join(p.Args, " "))
				}
				return fmt.Sprintf("pid %d", pid)
			}
		}
	}
	return ""
}

// listeningInodes parses /proc/net/tcp or tcp6 and returns the socket
// inodes listening (state 0A) on port. Malformed lines are skipped.
func listeningInodes(table []byte, port int) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil || int(p) != port {
			continue
		}
		if _, err := strconv.ParseUint(f[9], 10, 64); err == nil && f[9] != "0" {
			out = append(out, f[9])
		}
	}
	return out
}
