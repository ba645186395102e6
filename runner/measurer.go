package runner

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// openMeasurer is the one place a run's way of measuring is chosen:
// attack.workers > 0 attacks from worker pods (fleet, docs/distributed.md),
// anything else from this process. It returns the measurer and the target
// this process's attack is prepared for: the tunnel's or the scenario's
// URL for a local run; for a distributed one the target's in-cluster
// address, which the workers attack and this process never dials.
func openMeasurer(ctx context.Context, sc *scenarios.Scenario, kp *kubePath, runID string, o Options) (measure.Measurer, measure.Target, error) {
	if sc.Attack.Workers == 0 {
		t := measure.Target{URL: sc.Target.URL, Dial: o.Dial}
		if kp != nil && kp.tunnel != nil {
			t = measure.Target{URL: kp.targetURL(), Dial: kp.tunnel.DialContext}
		}
		local := &measure.Local{Scenario: sc, RunID: runID, Record: o.Record,
			Queue: measure.Queue{Workers: o.AttributionWorkers, Bytes: o.AttributionQueue, Abort: o.Abort}}
		return local, t, nil
	}
	url, err := sc.InClusterURL()
	if err != nil {
		return nil, measure.Target{}, fmt.Errorf("attack.workers: %w", err)
	}
	t := measure.Target{URL: url, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("a distributed run's coordinator sends no request")
	}}
	var pods []kube.Pod
	if kp.inv != nil {
		pods = kp.inv.Pods()
	}
	c, err := fleet.Start(ctx, fleet.Spec{Scenario: sc, RunID: runID, Source: o.Source, Version: o.Tool.Version,
		Clusters: kp.clusters, Pods: pods, LogLead: logSkew(sc), Record: recordSink(o.Record), Progress: o.Progress})
	if err != nil {
		return nil, measure.Target{}, err
	}
	return c, t, nil
}

// recordSink is the run's recorder for the workers' results, nil (not a
// nil Recorder in an interface) when the run records none.
func recordSink(r Recorder) fleet.ResultSink {
	if r == nil {
		return nil
	}
	return r
}
