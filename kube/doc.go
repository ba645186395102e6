// Package kube is mesh-verify's Kubernetes path: kubeconfig contexts per
// scenario cluster (Config, Cluster), the pods of the observed workloads in
// every cluster (Inventory, Inv), per-pod Prometheus counters read through
// the API server's pod proxy (Scrape, Delta), and the distributed
// workers' Indexed Job, Secret and ConfigMap (CreateWorkers, WorkerRun,
// SweepWorkers; docs/distributed.md, "The Job").
//
// The port-forward tunnel is kube/portforward; the RBAC permissions every
// call needs, and the manifest `mesh-verify rbac` prints, kube/access.
// IsDenied tells the API server's refusal (403, 401) from other errors.
//
// Setup errors name the cluster, the kubeconfig context and the call that
// failed (*ClusterError), so the CLI can map them to its setup exit code.
// Kubeconfig files are only ever read: nothing here writes ~/.kube.
package kube
