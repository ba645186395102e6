// Package kube is mesh-verify's Kubernetes path: kubeconfig contexts per
// scenario cluster (Config, Cluster), the pods of the observed workloads in
// every cluster (Inventory, Inv), an in-process port-forward tunnel whose
// DialContext plugs into an http.Transport (Tunnel), and per-pod Prometheus
// counters read through the API server's pod proxy (Scrape, Delta), and
// the distributed workers' Indexed Job, Secret and ConfigMap (CreateWorkers,
// WorkerRun, SweepWorkers; docs/distributed.md, "The Job").
//
// Permissions declares the RBAC permission every API call here (and in
// podlogs) needs and which feature makes it; Manifest turns them into the
// ServiceAccount, Roles and bindings `mesh-verify rbac` prints.
//
// Setup errors name the cluster, the kubeconfig context and the call that
// failed (*ClusterError), so the CLI can map them to its setup exit code.
// Kubeconfig files are only ever read: nothing here writes ~/.kube.
package kube
