package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/mesh-verify/mesh-verify/kube"
)

// kwok's namespaced, per-pod kinds (tools/lab/NOTES.md): an object named
// after the pod tells kwok's kubelet where that pod's log file is and
// where its ports really listen.
var (
	logsGVR        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
	portForwardGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}
)

// fieldManager owns the kwok objects in server-side apply.
const fieldManager = "mesh-verify-lab"

// Cluster is the daemon's connection to one lab cluster.
type Cluster struct {
	Name    string
	Context string
	rest    *rest.Config
	cs      kubernetes.Interface
	dyn     dynamic.Interface
}

// RESTConfig builds a client config for one context of the lab's
// kubeconfig file, ignoring $KUBECONFIG and ~/.kube (the lab owns its
// kubeconfig), the way mesh-verify itself loads kubeconfigs. The default
// 5 QPS would pace a burst of pods (a scale to 10) into seconds of
// waiting; these are local API servers.
func RESTConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{kubeconfig}, QPS: 200, Burst: 400, UserAgent: "mesh-verify-lab"})
	if err != nil {
		return nil, err
	}
	return cfg.RESTConfig(kubeContext)
}

// NewCluster connects to one cluster of the lab kubeconfig.
func NewCluster(name, kubeconfig, kubeContext string) (*Cluster, error) {
	cfg, err := RESTConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	return &Cluster{Name: name, Context: kubeContext, rest: cfg, cs: cs, dyn: dyn}, nil
}

// Clientset is the typed client.
func (c *Cluster) Clientset() kubernetes.Interface { return c.cs }

// applyKwok creates or updates the Logs and PortForward objects of a pod:
// each container's log file, and where each pod port really listens.
// They are owned by the pod, so the garbage collector removes them with
// it even when the daemon is not running.
func (c *Cluster) applyKwok(ctx context.Context, pod *corev1.Pod, logs []containerLog, fwds []forward) error {
	owner := []any{map[string]any{
		"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID),
	}}
	meta := func(kind string) map[string]any {
		return map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1",
			"kind":       kind,
			"metadata": map[string]any{
				"name": pod.Name, "namespace": pod.Namespace, "ownerReferences": owner,
				"labels": map[string]any{"app.kubernetes.io/managed-by": fieldManager},
			},
		}
	}
	// PortForward first: `lab up` proves the logs answer and then the
	// forward, so by the time the logs do, kwok has most likely seen both.
	var forwards []any
	for _, f := range fwds {
		host, p, err := splitAddr(f.addr)
		if err != nil {
			return err
		}
		forwards = append(forwards, map[string]any{
			"ports":  []any{int64(f.port)},
			"target": map[string]any{"port": int64(p), "address": host},
		})
	}
	pf := meta("PortForward")
	pf["spec"] = map[string]any{"forwards": forwards}
	var entries []any
	for _, l := range logs {
		entries = append(entries, map[string]any{
			"containers": []any{l.container},
			"logsFile":   l.file,
			"follow":     true,
		})
	}
	lg := meta("Logs")
	lg["spec"] = map[string]any{"logs": entries}
	objs := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{{portForwardGVR, pf}, {logsGVR, lg}}
	if len(fwds) == 0 {
		objs = objs[1:] // a pod without ports (a mesh-verify Job pod) has logs only
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o.obj}
		_, err := c.dyn.Resource(o.gvr).Namespace(pod.Namespace).Apply(ctx, pod.Name, u,
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("apply kwok %s for pod %s/%s in cluster %s: %w", u.GetKind(), pod.Namespace, pod.Name, c.Name, err)
		}
	}
	return nil
}

// probeLogs asks the API server for the last line of a container's log,
// which succeeds once kwok's kubelet knows the pod's Logs object.
func (c *Cluster) probeLogs(ctx context.Context, ns, pod, container string) error {
	tail := int64(1)
	_, err := c.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("logs of pod %s/%s container %s in cluster %s: %w", ns, pod, container, c.Name, err)
	}
	return nil
}

// probePortForward opens a port-forward stream to the pod's port through
// the API server, as `kubectl port-forward` does, and sends one
// `OPTIONS * HTTP/1.1`, which Go's HTTP server (every lab app and data
// plane) answers itself, so no app logs it as a request: the lab's check
// must not add lines to the real apps' logs. Any HTTP answer proves the
// forward; an error on the error stream ("no forward found for port")
// disproves it.
func (c *Cluster) probePortForward(ctx context.Context, ns, pod string, port int32) error {
	what := fmt.Sprintf("port-forward to pod %s/%s port %d in cluster %s", ns, pod, port, c.Name)
	transport, upgrader, err := spdy.RoundTripperFor(c.rest)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	u := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		return fmt.Errorf("%s: error stream: %w", what, err)
	}
	errStream.Close() // we write nothing on it; the kubelet writes failures
	remote := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(errStream, 4096))
		remote <- strings.TrimSpace(string(b))
	}()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		return fmt.Errorf("%s: data stream: %w", what, err)
	}
	req, _ := http.NewRequest(http.MethodOptions, "http://localhost", nil)
	req.URL.Opaque, req.Close = "*", true
	if err := req.Write(data); err != nil {
		return fmt.Errorf("%s: send probe: %w", what, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(data), req)
	if err != nil {
		select {
		case msg := <-remote:
			if msg != "" {
				return fmt.Errorf("%s: %s", what, msg)
			}
		case <-time.After(time.Second):
		}
		return fmt.Errorf("%s: read answer: %w", what, err)
	}
	resp.Body.Close()
	return nil
}

func splitAddr(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("address %q has no port", addr)
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("address %q: bad port: %w", addr, err)
	}
	return addr[:i], p, nil
}
