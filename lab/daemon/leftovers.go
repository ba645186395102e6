package daemon

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
)

// stopLeftovers stops what a daemon of the lab in dir that died without
// stopping (kill -9, a crash) left running: its apps, simulators and
// relays died with it, but its nginx data planes run on in their own
// process groups, answering 502 from backends that are gone. Each is
// stopped by its pid, after checking again that the pid still runs the
// lab's copy of nginx (NginxBinary), so no other process is signalled.
func stopLeftovers(dir string, log *slog.Logger) error {
	bin := NginxBinary(dir)
	left := kwok.RunningFrom(bin)
	if len(left) == 0 {
		return nil
	}
	for _, p := range left {
		if again, ok := kwok.ReadProc(p.PID); ok && again.Exe == p.Exe {
			log.Warn("stopping nginx left running by a previous lab daemon", "pid", p.PID, "exe", p.Exe)
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		still := kwok.RunningFrom(bin)
		if len(still) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			pids := make([]string, len(still))
			for i, p := range still {
				pids[i] = strconv.Itoa(p.PID)
			}
			return fmt.Errorf("lab daemon: nginx processes %s of a previous daemon (%s) still run after SIGKILL", strings.Join(pids, ", "), bin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StaleDataPlanes lists the nginx processes of the lab in dir that the
// daemon whose status is st does not run (its masters are the pods'
// DataPlanePID, their workers its children): left by a daemon that died,
// they answer beside the current ones, so the lab is not ready while any
// runs. A nil st (no daemon) makes every one stale.
func StaleDataPlanes(dir string, st *Status) []string {
	ours := map[int]bool{}
	if st != nil {
		for _, p := range st.Pods {
			if p.DataPlanePID != 0 {
				ours[p.DataPlanePID] = true
			}
		}
	}
	var out []string
	for _, p := range kwok.RunningFrom(NginxBinary(dir)) {
		if !ours[p.PID] && !ours[p.PPID] {
			out = append(out, fmt.Sprintf("nginx pid %d (%s), not run by the current daemon", p.PID, strings.Join(p.Args, " ")))
		}
	}
	return out
}
