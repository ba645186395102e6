package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/mesh-verify/mesh-verify/internal/certtest"
)

// maxWorkerNameLen is "mv-", the prefix, "-" and 8 hex digits.
const maxWorkerNameLen = 3 + maxNamePrefix + 1 + 8

func checkWorkerName(t *testing.T, runID, name string) {
	t.Helper()
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		t.Errorf("WorkerName(%q) = %q: %v", runID, name, errs)
	}
	sum := sha256.Sum256([]byte(runID))
	if !strings.HasPrefix(name, "mv-") || !strings.HasSuffix(name, hex.EncodeToString(sum[:4])) || len(name) > maxWorkerNameLen {
		t.Errorf("WorkerName(%q) = %q: want mv-, at most %d bytes, ending in the id's hash", runID, name, maxWorkerNameLen)
	}
	// The Indexed Job's pod hostnames are "<job>-<index>", a DNS label.
	if errs := validation.IsDNS1123Label(name + "-" + strconv.Itoa(MaxWorkers-1)); len(errs) > 0 {
		t.Errorf("WorkerName(%q) = %q leaves no room for the pods' hostnames: %v", runID, name, errs)
	}
}

func TestWorkerName(t *testing.T) {
	for _, tc := range []struct{ runID, prefix string }{
		{"20261201T104513Z-a1b2c3", "mv-20261201t104513z-a1b2c3-"},
		{"run_1.x", "mv-run-1-x-"},
		{"--A--B--", "mv-a-b-"},
		{"", "mv-"},
		{"___", "mv-"},
		{"é", "mv-"},
		{strings.Repeat("a", 100), "mv-" + strings.Repeat("a", maxNamePrefix) + "-"},
		{strings.Repeat("a", maxNamePrefix-1) + "_b", "mv-" + strings.Repeat("a", maxNamePrefix-1) + "-"},
	} {
		name := WorkerName(tc.runID)
		if !strings.HasPrefix(name, tc.prefix) || len(name) != len(tc.prefix)+8 {
			t.Errorf("WorkerName(%q) = %q, want %s<8 hex digits>", tc.runID, name, tc.prefix)
		}
		checkWorkerName(t, tc.runID, name)
		if WorkerName(tc.runID) != name {
			t.Errorf("WorkerName(%q) is not deterministic", tc.runID)
		}
	}
	// Ids that read the same once lowercased and cleaned get different names.
	a, b := WorkerName("20261201T104513Z-a1b2c3"), WorkerName("20261201t104513z_a1b2c3")
	if a == b {
		t.Errorf("two run ids share the name %s", a)
	}
}

func FuzzWorkerName(f *testing.F) {
	for _, s := range []string{"20261201T104513Z-a1b2c3", "", "-", "a_b", strings.Repeat("x-", 40), "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, runID string) {
		checkWorkerName(t, runID, WorkerName(runID))
	})
}

func validSpec() WorkerSpec {
	return WorkerSpec{RunID: "20261201T104513Z-a1b2c3", Namespace: "load", Workers: 4, Image: "ghcr.io/mesh-verify/mesh-verify:v1",
		Scenario: []byte("kind: Scenario\n"), Inventory: []byte("[]"), Run: []byte(`{"runId":"x"}`), Deadline: time.Minute}
}

func TestWorkerSpecValidate(t *testing.T) {
	if err := validSpec().Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	// big fills the Secret (scenario and CA), bigCM the ConfigMap
	// (inventory and run config), to n bytes.
	big := func(n int) func(*WorkerSpec) {
		return func(s *WorkerSpec) { s.Scenario = []byte(strings.Repeat("a", n-len(s.CA))) }
	}
	bigCM := func(n int) func(*WorkerSpec) {
		return func(s *WorkerSpec) { s.Inventory = []byte(`["` + strings.Repeat("a", n-len(s.Run)-4) + `"]`) }
	}
	cert, key := certtest.Pair(t)
	for _, tc := range []struct {
		name   string
		change func(*WorkerSpec)
		err    string
	}{
		{"max workers", func(s *WorkerSpec) { s.Workers = MaxWorkers }, ""},
		{"one worker", func(s *WorkerSpec) { s.Workers = 1 }, ""},
		{"secret at the limit", big(MaxWorkerConfigBytes), ""},
		{"configmap at the limit", bigCM(MaxWorkerConfigBytes), ""},
		{"both at the limit", func(s *WorkerSpec) { big(MaxWorkerConfigBytes)(s); bigCM(MaxWorkerConfigBytes)(s) }, ""},
		{"a CA", func(s *WorkerSpec) { s.CA = cert }, ""},
		{"no inventory", func(s *WorkerSpec) { s.Inventory = nil }, ""},
		{"longest deadline", func(s *WorkerSpec) { s.Deadline = MaxWorkerDeadline }, ""},
		{"longest ttl", func(s *WorkerSpec) { s.TTL = MaxWorkerTTL }, ""},
		{"service account", func(s *WorkerSpec) { s.ServiceAccount = "gate-worker" }, ""},
		{"last source's offset", func(s *WorkerSpec) { s.Workers, s.IndexOffset = 2, MaxWorkers-2 }, ""},
		{"offset past the run", func(s *WorkerSpec) { s.Workers, s.IndexOffset = 2, MaxWorkers-1 }, "index offset 9999: want 0 to 9998 for 2 workers"},
		{"negative offset", func(s *WorkerSpec) { s.IndexOffset = -1 }, "index offset -1"},
		{"no workers", func(s *WorkerSpec) { s.Workers = 0 }, "workers 0: want 1 to 10000"},
		{"too many workers", func(s *WorkerSpec) { s.Workers = MaxWorkers + 1 }, "workers 10001"},
		{"secret over the limit", big(MaxWorkerConfigBytes + 1), "scenario and CA are 1032193 bytes together: the workers' Secret holds at most 1032192"},
		{"configmap over the limit", bigCM(MaxWorkerConfigBytes + 1), "inventory and run config are 1032193 bytes together: the workers' ConfigMap holds at most 1032192"},
		{"a CA with its key", func(s *WorkerSpec) { s.CA = append(cert, key...) }, "ca: PEM block 2 (PRIVATE KEY) holds a private key"},
		{"a CA of no certificate", func(s *WorkerSpec) { s.CA = []byte("x") }, "ca: holds no PEM certificate"},
		{"no run id", func(s *WorkerSpec) { s.RunID = "" }, "no run id"},
		{"run id not a label value", func(s *WorkerSpec) { s.RunID = "a b" }, `run id "a b" is no label value`},
		{"run id too long", func(s *WorkerSpec) { s.RunID = strings.Repeat("a", 64) }, "is no label value"},
		{"bad namespace", func(s *WorkerSpec) { s.Namespace = "Load" }, `namespace "Load"`},
		{"no image", func(s *WorkerSpec) { s.Image = " " }, "want an image reference"},
		{"bad service account", func(s *WorkerSpec) { s.ServiceAccount = "A_B" }, `service account "A_B"`},
		{"no scenario", func(s *WorkerSpec) { s.Scenario = nil }, "no scenario or run config"},
		{"run config not JSON", func(s *WorkerSpec) { s.Run = []byte("{") }, "run config is not JSON"},
		{"inventory not JSON", func(s *WorkerSpec) { s.Inventory = []byte("[") }, "inventory is not JSON"},
		{"no deadline", func(s *WorkerSpec) { s.Deadline = 0 }, "deadline 0s: want 1s to 24h0m0s"},
		{"deadline too long", func(s *WorkerSpec) { s.Deadline = MaxWorkerDeadline + time.Second }, "deadline 24h0m1s"},
		{"negative ttl", func(s *WorkerSpec) { s.TTL = -time.Second }, "ttl -1s"},
		{"ttl too long", func(s *WorkerSpec) { s.TTL = MaxWorkerTTL + time.Second }, "ttl 168h0m1s"},
		{"pod template", func(s *WorkerSpec) {
			s.Pod = WorkerPodTemplate{Labels: map[string]string{"team": "load"}, Annotations: map[string]string{"sidecar.istio.io/inject": "true"},
				NodeSelector: map[string]string{"kubernetes.io/os": "linux"}, ImagePullSecrets: []string{"regcred"}, Sidecar: SidecarKuma}
		}, ""},
		{"the worker's own label", func(s *WorkerSpec) { s.Pod.Labels = map[string]string{LabelRun: "x"} }, "pod label mesh-verify.io/run: the worker's own label, not overridable"},
		{"bad pod label", func(s *WorkerSpec) { s.Pod.Labels = map[string]string{"team": "a b"} }, `pod label team="a b"`},
		{"bad node selector", func(s *WorkerSpec) { s.Pod.NodeSelector = map[string]string{"-x": "y"} }, `node selector -x="y"`},
		{"bad annotation", func(s *WorkerSpec) { s.Pod.Annotations = map[string]string{"a b": ""} }, "pod annotation a b"},
		{"bad pull secret", func(s *WorkerSpec) { s.Pod.ImagePullSecrets = []string{"Reg"} }, `image pull secret "Reg"`},
		{"bad sidecar", func(s *WorkerSpec) { s.Pod.Sidecar = "linkerd" }, `sidecar "linkerd": want istio, kuma or none`},
	} {
		s := validSpec()
		tc.change(&s)
		err := s.Validate()
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "worker spec: ") {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), strings.Split(string(key), "\n")[1]) {
			t.Errorf("%s: error %v echoes the key", tc.name, err)
		}
	}
}

// The ConfigMap carries nothing secret; the Secret carries the scenario
// and the CA.
func TestWorkerData(t *testing.T) {
	s := validSpec()
	cert, _ := certtest.Pair(t)
	s.CA = cert
	cm, secret := s.ConfigMapData(), s.SecretData()
	if len(cm) != 2 || cm[WorkerKeyRun] != string(s.Run) || cm[WorkerKeyInventory] != string(s.Inventory) {
		t.Errorf("ConfigMapData %v: want only run.json and inventory.json", cm)
	}
	if len(secret) != 2 || string(secret[WorkerKeyScenario]) != string(s.Scenario) || string(secret[WorkerKeyCA]) != string(cert) {
		t.Errorf("SecretData %v: want scenario.yaml and ca.pem", secret)
	}
}

func TestWorkerJobFields(t *testing.T) {
	s := validSpec()
	s.Deadline = 90*time.Second + time.Millisecond
	j := workerJob(s, "mv-x", time.Unix(0, 0))
	if *j.Spec.ActiveDeadlineSeconds != 91 || *j.Spec.TTLSecondsAfterFinished != int32(DefaultWorkerTTL/time.Second) || !*j.Spec.Suspend {
		t.Errorf("deadline %d (want 91: rounded up), ttl %d, suspend %v", *j.Spec.ActiveDeadlineSeconds, *j.Spec.TTLSecondsAfterFinished, *j.Spec.Suspend)
	}
	s.TTL = 10 * time.Second
	if j := workerJob(s, "mv-x", time.Unix(0, 0)); *j.Spec.TTLSecondsAfterFinished != 10 {
		t.Errorf("ttl %d, want 10", *j.Spec.TTLSecondsAfterFinished)
	}
}

// A source's Job tells its workers where its numbering starts, from their
// command line: their first record (an error before the ConfigMap is
// read) already carries the run's index.
func TestWorkerJobIndexOffset(t *testing.T) {
	for _, c := range []struct {
		offset int
		want   string
	}{{0, ""}, {2, "--index-offset 2"}} {
		s := validSpec()
		s.IndexOffset = c.offset
		args := strings.Join(workerJob(s, "mv-x", time.Unix(0, 0)).Spec.Template.Spec.Containers[0].Args, " ")
		if got := strings.Contains(args, "--index-offset"); got != (c.want != "") || !strings.Contains(args, c.want) {
			t.Errorf("offset %d: args %q, want %q", c.offset, args, c.want)
		}
	}
}

func TestParseCompletionIndex(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"9999", 9999, true},
		{"10000", -1, false}, {"", -1, false}, {"-1", -1, false}, {"07", -1, false}, {"+1", -1, false}, {"1e3", -1, false}, {" 1", -1, false},
	} {
		got, ok := parseCompletionIndex(tc.s)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseCompletionIndex(%q) = %d, %v; want %d, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseCompletionIndex(f *testing.F) {
	for _, s := range []string{"0", "9999", "10000", "-0", "00", "+5", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseCompletionIndex(s)
		if ok != (n >= 0) || (ok && (n >= MaxWorkers || strconv.Itoa(n) != s)) {
			t.Errorf("parseCompletionIndex(%q) = %d, %v", s, n, ok)
		}
	})
}

func TestWorkerPod(t *testing.T) {
	ann := func(i string) map[string]string { return map[string]string{batchv1.JobCompletionIndexAnnotation: i} }
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		pod    corev1.Pod
		want   WorkerPod
		failed bool
	}{
		{"pending, no status", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann("2")}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			WorkerPod{Name: "p", Index: 2, Phase: corev1.PodPending}, false},
		{"index from the label", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: ann("3")}},
			WorkerPod{Name: "p", Index: 3}, false},
		{"image pull", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann("0")}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}},
			WorkerPod{Name: "p", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "ErrImagePull", Message: "not found"}, false},
		{"running", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann("1")}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}},
			WorkerPod{Name: "p", Index: 1, Phase: corev1.PodRunning, State: "running"}, false},
		{"oom killed", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann("1")}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}},
			WorkerPod{Name: "p", Index: 1, Phase: corev1.PodFailed, State: "terminated", ExitCode: 137, Reason: "OOMKilled"}, true},
		{"deadline exceeded, being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann("x"), DeletionTimestamp: &now},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active too long"}},
			WorkerPod{Name: "p", Index: -1, Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active too long", Deleting: true}, true},
		{"succeeded", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann("0")}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}},
				{Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}},
			WorkerPod{Name: "p", Index: 0, Phase: corev1.PodSucceeded, State: "terminated", Reason: "Completed"}, false},
	} {
		got := workerPod(&tc.pod)
		if got != tc.want || got.Failed() != tc.failed {
			t.Errorf("%s: %+v (failed %v), want %+v (failed %v)", tc.name, got, got.Failed(), tc.want, tc.failed)
		}
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"2026-12-01T09:59:59Z", true},
		{"2026-12-01T10:00:00Z", true},
		{"2026-12-01T10:00:01Z", false},
		{"2026-12-01T11:00:00+01:00", true},
		{"", false},
		{"yesterday", false},
	} {
		if got := expired(map[string]string{AnnotationExpiresAt: tc.value}, now); got != tc.want {
			t.Errorf("expired(%q) at %s = %v, want %v", tc.value, now.Format(time.RFC3339), got, tc.want)
		}
	}
	if expired(nil, now) {
		t.Errorf("an object without annotations is expired")
	}
}

func TestJobStatus(t *testing.T) {
	two, yes := int32(2), true
	cond := func(ty batchv1.JobConditionType, st corev1.ConditionStatus, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: ty, Status: st, Reason: reason, Message: reason + "!"}
	}
	for _, tc := range []struct {
		name string
		job  batchv1.Job
		want WorkerJobStatus
	}{
		{"suspended", batchv1.Job{Spec: batchv1.JobSpec{Suspend: &yes}}, WorkerJobStatus{Suspended: true}},
		{"running", batchv1.Job{Status: batchv1.JobStatus{Active: 3, Ready: &two, Succeeded: 1}}, WorkerJobStatus{Active: 3, Ready: 2, Succeeded: 1}},
		{"deadline", batchv1.Job{Status: batchv1.JobStatus{Failed: 2, Conditions: []batchv1.JobCondition{
			cond(batchv1.JobFailureTarget, corev1.ConditionTrue, "DeadlineExceeded"), cond(batchv1.JobFailed, corev1.ConditionTrue, "DeadlineExceeded")}}},
			WorkerJobStatus{Failed: 2, Done: true, Reason: "DeadlineExceeded", Message: "DeadlineExceeded!"}},
		{"failing: its pods are being terminated", batchv1.Job{Status: batchv1.JobStatus{Active: 1, Failed: 1, Conditions: []batchv1.JobCondition{
			cond(batchv1.JobFailureTarget, corev1.ConditionTrue, "DeadlineExceeded")}}},
			WorkerJobStatus{Active: 1, Failed: 1, Done: true, Reason: "DeadlineExceeded", Message: "DeadlineExceeded!"}},
		{"complete", batchv1.Job{Status: batchv1.JobStatus{Succeeded: 4, Conditions: []batchv1.JobCondition{
			cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "x"), cond(batchv1.JobComplete, corev1.ConditionTrue, "")}}},
			WorkerJobStatus{Succeeded: 4, Done: true, Complete: true}},
		{"a condition not true", batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionFalse, "x")}}},
			WorkerJobStatus{}},
	} {
		if got := JobStatus(&tc.job); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestWatchPodsGivesUp runs WatchPods against an HTTP server standing in
// for an API server that keeps failing (a real kube-apiserver cannot be
// made to fail on demand): it gives up after MaxWatchFailures failures in
// a row, whether the list fails or every watch ends at once.
func TestWatchPodsGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name           string
		listOK         bool
		lists, watches int64
		err            string
	}{
		{"the list fails", false, MaxWatchFailures, 0, "list pods of job mv-x in namespace load"},
		{"every watch ends at once", true, MaxWatchFailures, MaxWatchFailures, "the watch ended at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var lists, watches atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.URL.Query().Get("watch") == "true":
					watches.Add(1)
					w.WriteHeader(http.StatusOK) // and no event: the watch ends
				case tc.listOK:
					lists.Add(1)
					fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`)
				default:
					lists.Add(1)
					w.WriteHeader(http.StatusInternalServerError)
					fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"InternalError","code":500}`)
				}
			}))
			defer srv.Close()
			client, err := kclient.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			wr := &WorkerRun{Cluster: &Cluster{Name: "c1", Context: "kind-c1", Server: srv.URL, Client: client}, Namespace: "load", Name: "mv-x", RunID: "r"}
			calls := 0
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = wr.WatchPods(ctx, func(p []WorkerPod) {
				calls++
				if len(p) != 0 {
					t.Errorf("pods %v from an empty list", p)
				}
			})
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "cluster c1") {
				t.Errorf("error %v, want one naming the cluster and %q", err, tc.err)
			}
			if lists.Load() != tc.lists || watches.Load() != tc.watches || int64(calls) != tc.lists*btoi(tc.listOK) {
				t.Errorf("%d lists, %d watches, %d callbacks; want %d, %d, one per list", lists.Load(), watches.Load(), calls, tc.lists, tc.watches)
			}
		})
	}
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// A pod that will not start without a change is told from one still
// starting: the image's waiting reasons and the scheduler's condition.
func TestWorkerPodStartFailure(t *testing.T) {
	t.Parallel()
	waiting := func(reason string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}}
	}
	unschedulable := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		want   string
	}{
		{"ErrImagePull", waiting("ErrImagePull"), "ErrImagePull"},
		{"ImagePullBackOff", waiting("ImagePullBackOff"), "ImagePullBackOff"},
		{"InvalidImageName", waiting("InvalidImageName"), "InvalidImageName"},
		{"ErrImageNeverPull", waiting("ErrImageNeverPull"), "ErrImageNeverPull"},
		{"still creating", waiting("ContainerCreating"), ""},
		{"unschedulable", unschedulable, "Unschedulable"},
		{"being scheduled", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}}, ""},
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, ""},
	} {
		p := workerPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tc.status})
		if got := p.StartFailure(); got != tc.want {
			t.Errorf("%s: StartFailure() = %q, want %q (%+v)", tc.name, got, tc.want, p)
		}
	}
	if p := workerPod(&corev1.Pod{Status: unschedulable}); p.Reason != "Unschedulable" || p.Message != "0/3 nodes are available" {
		t.Errorf("unschedulable pod %+v: want the condition's reason and message", p)
	}
}

// A resource the scenario names replaces both default values of it; the
// others keep theirs.
func TestWorkerResources(t *testing.T) {
	t.Parallel()
	q := resource.MustParse
	r := workerResources(WorkerPodTemplate{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("4")},
		Limits:   corev1.ResourceList{"example.com/gpu": q("1")},
	}})
	for _, c := range []struct {
		what string
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{
		{"cpu request", r.Requests, corev1.ResourceCPU, "4"},
		{"cpu limit (the default's 2 would be below the request)", r.Limits, corev1.ResourceCPU, ""},
		{"memory request", r.Requests, corev1.ResourceMemory, "64Mi"},
		{"memory limit", r.Limits, corev1.ResourceMemory, "512Mi"},
		{"gpu limit", r.Limits, "example.com/gpu", "1"},
	} {
		got := ""
		if v, ok := c.list[c.name]; ok {
			got = v.String()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
	if d := workerResources(WorkerPodTemplate{}); d.Requests.Cpu().String() != "100m" || d.Limits.Memory().String() != "512Mi" {
		t.Errorf("defaults %+v", d)
	}
}
