// Package meshconfig derives an expected split from the mesh's own
// objects instead of weights copied into a scenario by hand: Istio's
// VirtualService (route weights per destination, resolved through the
// DestinationRule subsets and the Service to the pods, and their
// mirrors), Kuma's MeshHTTPRoute and legacy TrafficRoute, Skupper's link
// costs, Cilium's global-service annotations with the ready backends
// behind them, and the weights an Argo Rollouts Rollout recorded in its
// status (docs/expect-from-mesh.md).
//
// Fetch reads the objects once, with the user's credentials, through a
// dynamic client per cluster; Resolve is a pure function of what was
// read, so the rules are tested on objects built by hand. Every result
// carries its provenance (kind, namespace, name, resourceVersion and the
// field paths read), and every error names the object and the field, or
// the verb and resource the user may not use.
package meshconfig
