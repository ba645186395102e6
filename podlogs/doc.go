// Package podlogs follows the logs of many pods in many clusters at once and
// joins their lines to the requests of an attack.
//
// Responses cannot show everything: a mirrored copy's response is discarded
// by the proxy, and many apps do not name the pod that served them. The pod
// logs can, so every observed pod's log is followed from the attack start,
// with bounded concurrency, and resumed exactly after a dropped stream: the
// API server only accepts sinceTime with one-second resolution, so a stream
// reopens at the second of the last delivered line and skips the lines of
// that second it already delivered (docs/architecture.md, "Attribution and tally").
//
// The core (Follower, Rule, Counter) knows nothing of client-go: it reads
// from an Opener, and ClientGoOpener adapts a clientset per cluster.
package podlogs
