// Package metricsout publishes a run's numbers as Prometheus metrics, for
// the canary dashboards and alerts that watch a rollout beside the gate:
// an exposition endpoint that a Prometheus scrapes while the run lasts
// (live counts from the tally), and a remote write at the end of the run
// (the judged report: shares, expected shares, verdicts, success,
// latency). Both carry the run id and the scenario as labels, so one
// run's series can be told from the next.
//
// The metric names follow Prometheus' conventions (a mesh_verify_ prefix,
// _total for counters, base units: seconds, ratios 0..1); docs/metrics.md
// lists them. Verdicts are OpenMetrics state sets: one series per verdict
// value, 1 for the one in force.
package metricsout
