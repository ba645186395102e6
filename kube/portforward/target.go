package portforward

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mesh-verify/mesh-verify/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Target kinds.
const (
	KindPod        = "pod"
	KindService    = "service"
	KindDeployment = "deployment"
)

// Target is what a tunnel forwards to: kind/name and a port, as in
// `kubectl port-forward svc/NAME PORT`.
type Target struct {
	Kind string // KindPod, KindService or KindDeployment
	Name string
	// Port is a number or a port name: a Service port (number or name) for
	// a Service, a container port (number or name) for a pod or deployment.
	Port string
}

func (t Target) String() string { return t.Kind + "/" + t.Name }

// ParseTarget parses "pod/NAME", "svc/NAME", "service/NAME",
// "deploy/NAME", "deployment/NAME" (kubectl's spellings) and a port.
func ParseTarget(resource, port string) (Target, error) {
	kind, name, ok := strings.Cut(resource, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Target{}, fmt.Errorf("port-forward target %q: want pod/NAME, svc/NAME or deploy/NAME", resource)
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		kind = KindPod
	case "svc", "service", "services":
		kind = KindService
	case "deploy", "deployment", "deployments":
		kind = KindDeployment
	default:
		return Target{}, fmt.Errorf("port-forward target %q: unsupported kind %q (want pod, svc or deploy)", resource, kind)
	}
	if port == "" {
		return Target{}, fmt.Errorf("port-forward target %s: no port", resource)
	}
	if n, err := strconv.Atoi(port); err == nil && (n < 1 || n > 65535) {
		return Target{}, fmt.Errorf("port-forward target %s: port %d out of range", resource, n)
	}
	return Target{Kind: kind, Name: name, Port: port}, nil
}

// resolved is the pod and container port a target points at right now.
type resolved struct {
	pod  *corev1.Pod
	port int32
	// selector of the Service or Deployment (nil for a pod target); used by
	// the observed-workload warning.
	selector labels.Selector
}

// resolve finds the pod and container port like kubectl port-forward:
// a pod as named; for a Service or Deployment ONE pod chosen like kubectl's
// AttachablePodForObject (docs/architecture.md "Reaching the entry point"): the pods its selector matches,
// sorted by kubectl's ActivePods order, most active first. A Service port is
// translated to the container's targetPort, named targetPorts included.
func resolve(ctx context.Context, c *kube.Cluster, ns string, t Target) (*resolved, error) {
	core := c.Client.CoreV1()
	var (
		pod *corev1.Pod
		svc *corev1.Service
		sel labels.Selector
	)
	switch t.Kind {
	case KindPod:
		p, err := core.Pods(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, c.Wrap("get pod "+ns+"/"+t.Name, err)
		}
		pod = p
	case KindService:
		s, err := core.Services(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, c.Wrap("get service "+ns+"/"+t.Name, err)
		}
		if len(s.Spec.Selector) == 0 {
			return nil, fmt.Errorf("service %s/%s has no selector, so there is no pod to forward to", ns, t.Name)
		}
		svc, sel = s, labels.SelectorFromSet(s.Spec.Selector)
	case KindDeployment:
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, c.Wrap("get deployment "+ns+"/"+t.Name, err)
		}
		s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("deployment %s/%s: invalid selector: %w", ns, t.Name, err)
		}
		sel = s
	default:
		return nil, fmt.Errorf("port-forward target %s: unsupported kind", t)
	}
	if pod == nil {
		list, err := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, c.Wrap("list pods in namespace "+ns, err)
		}
		pod = pickPod(list.Items)
		if pod == nil {
			return nil, fmt.Errorf("no running pod for %s in namespace %s (selector %s)", t, ns, sel)
		}
	}
	if pod.Status.Phase != corev1.PodRunning {
		// kubectl refuses the same way: "unable to forward port because pod is not running".
		return nil, fmt.Errorf("pod %s/%s is not running (phase %s)", ns, pod.Name, pod.Status.Phase)
	}
	port, err := targetPort(t, svc, pod)
	if err != nil {
		return nil, err
	}
	return &resolved{pod: pod, port: port, selector: sel}, nil
}

// pickPod returns the most active pod in kubectl's sense, nil when none is
// running: kubectl sorts sort.Reverse(podutils.ActivePods) and takes the
// first; a pod that is not Running is then refused, so pick among running
// pods that are not being deleted when there are any.
func pickPod(items []corev1.Pod) *corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(items))
	for i := range items {
		if items[i].Status.Phase == corev1.PodRunning && items[i].DeletionTimestamp == nil {
			pods = append(pods, &items[i])
		}
	}
	if len(pods) == 0 {
		return nil
	}
	sort.Sort(sort.Reverse(activePods(pods)))
	return pods[0]
}

// targetPort is the container port to forward to (kubectl's
// translateServicePortToTargetPort and convertPodNamedPortToNumber).
func targetPort(t Target, svc *corev1.Service, pod *corev1.Pod) (int32, error) {
	if svc == nil {
		if n, err := strconv.Atoi(t.Port); err == nil {
			return int32(n), nil
		}
		return containerPortByName(pod, t.Port)
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Name == t.Port || strconv.Itoa(int(p.Port)) == t.Port {
			sp = p
			break
		}
	}
	if sp == nil {
		return 0, fmt.Errorf("service %s/%s has no port %s", svc.Namespace, svc.Name, t.Port)
	}
	if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
		return 0, fmt.Errorf("service %s/%s port %s is %s; port-forward carries TCP only", svc.Namespace, svc.Name, t.Port, sp.Protocol)
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return sp.Port, nil // headless: kubectl forwards the port as is
	}
	switch {
	case sp.TargetPort.Type == intstr.String:
		return containerPortByName(pod, sp.TargetPort.StrVal)
	case sp.TargetPort.IntValue() == 0:
		return sp.Port, nil // targetPort omitted: same as port
	default:
		return int32(sp.TargetPort.IntValue()), nil
	}
}

func containerPortByName(pod *corev1.Pod, name string) (int32, error) {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.Name == name {
					return p.ContainerPort, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("pod %s/%s has no container port named %q", pod.Namespace, pod.Name, name)
}

// activePods is kubectl's podutils.ActivePods ordering (k8s.io/kubectl
// pkg/util/podutils), copied to avoid depending on kubectl: "less" means
// less active, so sort.Reverse puts the best pod to forward to first.
type activePods []*corev1.Pod

func (s activePods) Len() int      { return len(s) }
func (s activePods) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s activePods) Less(i, j int) bool {
	a, b := s[i], s[j]
	// 1. Unassigned < assigned
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	// 2. Pending < Unknown < Running
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	if rank[a.Status.Phase] != rank[b.Status.Phase] {
		return rank[a.Status.Phase] < rank[b.Status.Phase]
	}
	// 3. Not ready < ready
	if kube.PodReady(a) != kube.PodReady(b) {
		return !kube.PodReady(a)
	}
	// 4. Deleting < not deleting
	if (a.DeletionTimestamp != nil) != (b.DeletionTimestamp != nil) {
		return a.DeletionTimestamp != nil
	}
	// 5. Older deletion timestamp < newer
	if a.DeletionTimestamp != nil && b.DeletionTimestamp != nil && !a.DeletionTimestamp.Equal(b.DeletionTimestamp) {
		return a.DeletionTimestamp.Before(b.DeletionTimestamp)
	}
	// 6. Ready for a shorter time < longer (the latest ready is smaller)
	if kube.PodReady(a) && kube.PodReady(b) {
		ta, tb := readyTime(a), readyTime(b)
		if !ta.Equal(tb) {
			return afterOrZero(ta, tb)
		}
	}
	// 7. More restarts < fewer restarts
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	// 8. Empty creation time < newer < older
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return afterOrZero(&a.CreationTimestamp, &b.CreationTimestamp)
	}
	return false
}

func afterOrZero(t1, t2 *metav1.Time) bool {
	if t1.Time.IsZero() || t2.Time.IsZero() {
		return t1.Time.IsZero()
	}
	return t1.After(t2.Time)
}

func readyTime(p *corev1.Pod) *metav1.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return &c.LastTransitionTime
		}
	}
	return &metav1.Time{}
}

func maxRestarts(p *corev1.Pod) int32 {
	var m int32
	for _, s := range p.Status.ContainerStatuses {
		m = max(m, s.RestartCount)
	}
	return m
}
