package lab

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// applyCluster creates a cluster's node, namespaces, the topology's
// manifests (kubectl apply: the meshes' objects and the tutorial's
// Services, before any pod, so every entry starts with its route), the
// Services and Deployments lab.yaml renders, and the manifests'
// Deployments as the lab injects them (kubectl apply). The clusters
// are fresh, so everything is created; an object that exists already (a
// retried up) is updated to the topology's. kcmRunning says whether the
// cluster's controller-manager runs (kwok.Lab.ControllerManagerRunning).
func applyCluster(ctx context.Context, cfg *rest.Config, cluster string, t *topology.Topology, kubectl kubectlFunc, kcmRunning func() bool) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	// The API server answers as kwokctl returns, but may still be
	// finishing its bootstrap: retry the first write briefly.
	err = kwok.Retry(ctx, 15*time.Second, 100*time.Millisecond, func() error {
		_, err := cs.CoreV1().Nodes().Create(ctx, topology.Node(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create node %s in cluster %s: %w", topology.NodeName, cluster, err)
	}
	if err := waitKubelet(ctx, cs, cluster); err != nil {
		return err
	}
	for _, ns := range t.Namespaces(cluster) {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s in cluster %s: %w", ns, cluster, err)
		}
	}
	// The controller-manager creates each namespace's default
	// ServiceAccount a moment later; pods are refused until it exists, and
	// the ReplicaSet controller would back off for seconds, so wait.
	for _, ns := range t.Namespaces(cluster) {
		if err := waitServiceAccount(ctx, cs, cluster, ns, kcmRunning, saWait, saWaitRunning); err != nil {
			return err
		}
	}
	if err := applyManifests(ctx, kubectl, cluster, t); err != nil {
		return err
	}
	for _, s := range t.LabServiceObjects(cluster) {
		_, err := cs.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// A Service's spec is the topology's by construction: keep its
			// ClusterIP, but put back its labels and annotations (Cilium's
			// global/affinity), which a kubectl annotate may have changed.
			var cur *corev1.Service
			if cur, err = cs.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); err == nil &&
				(!maps.Equal(cur.Labels, s.Labels) || !maps.Equal(cur.Annotations, s.Annotations)) {
				cur.Labels, cur.Annotations = s.Labels, s.Annotations
				_, err = cs.CoreV1().Services(s.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("create Service %s/%s in cluster %s: %w", s.Namespace, s.Name, cluster, err)
		}
	}
	for _, d := range t.Deployments(cluster) {
		_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *appsv1.Deployment
			if cur, err = cs.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
				d.ResourceVersion = cur.ResourceVersion
				_, err = cs.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("create Deployment %s/%s in cluster %s: %w", d.Namespace, d.Name, cluster, err)
		}
	}
	return applyDeployments(ctx, kubectl, cluster, t)
}

// brokenClusterError is a cluster whose API server answers but whose
// kwok controller or controller-manager is not working — in practice a
// port another lab took between kwokctl's choice and the bind. Up
// deletes and recreates such a cluster.
type brokenClusterError struct {
	cluster string
	err     error
}

func (e *brokenClusterError) Error() string {
	return fmt.Sprintf("cluster %s is broken: %v", e.cluster, e.err)
}

func (e *brokenClusterError) Unwrap() error { return e.err }

// saWait bounds the wait for a namespace's default ServiceAccount when
// the controller-manager is gone (it could not bind its port: the cluster
// is created again); saWaitRunning while it runs and lost no port, as a
// starved one is slow, not gone (by their logs, 5-11 s from start to the
// ServiceAccount controller with three labs coming up at a load of 4-8 on
// 2 cores), and creating the cluster again would only add load.
const (
	saWait        = 30 * time.Second
	saWaitRunning = 2 * time.Minute
)

// waitServiceAccount waits for namespace ns's default ServiceAccount: at
// most wait, or waitRunning while kcmRunning says the controller-manager
// runs. Past the bound the cluster is a *brokenClusterError.
func waitServiceAccount(ctx context.Context, cs kubernetes.Interface, cluster, ns string, kcmRunning func() bool, wait, waitRunning time.Duration) error {
	begin := time.Now()
	wctx, cancel := context.WithTimeout(ctx, max(wait, waitRunning))
	defer cancel()
	for {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(wctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		waited := time.Since(begin)
		if waited >= wait && !kcmRunning() || wctx.Err() != nil {
			return &brokenClusterError{cluster, fmt.Errorf("default ServiceAccount of namespace %s never appeared in %v (kube-controller-manager running: %v): %w",
				ns, waited.Round(100*time.Millisecond), kcmRunning(), err)}
		}
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitKubelet waits for kwok's controller to publish the node's kubelet
// endpoint, through which `kubectl logs` and `port-forward` reach it. It
// never appears when the controller could not bind its port.
func waitKubelet(ctx context.Context, cs kubernetes.Interface, cluster string) error {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		n, err := cs.CoreV1().Nodes().Get(wctx, topology.NodeName, metav1.GetOptions{})
		if err == nil && n.Status.DaemonEndpoints.KubeletEndpoint.Port != 0 {
			return nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &brokenClusterError{cluster, fmt.Errorf("node %s has no kubelet endpoint: the kwok controller is not serving (see its log under kwok/clusters/%s/logs)", topology.NodeName, cluster)}
		case <-time.After(100 * time.Millisecond):
		}
	}
}
