package kube

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mesh-verify/mesh-verify/internal/certpem"
)

// The contract between the coordinator and `mesh-verify worker`
// (docs/distributed.md): the keys of the worker's ConfigMap and Secret,
// the annotations that start and stop the attack, and the labels every
// object of a distributed run carries.
const (
	// WorkerKeyScenario (the scenario as run: its attack.headers values,
	// credentials often) is in the Secret.
	WorkerKeyScenario = "scenario.yaml"
	// WorkerKeyInventory and WorkerKeyRun are in the ConfigMap: pod names
	// and versions, the run id, the worker count, the in-cluster target
	// URL, nothing secret.
	WorkerKeyInventory = "inventory.json"
	WorkerKeyRun       = "run.json"
	// WorkerKeyCA, in the Secret, holds the certificates of the
	// scenario's target.tls.ca, a file on the coordinator's machine the
	// pods do not have; absent when the scenario names none.
	WorkerKeyCA = "ca.pem"

	// AnnotationStartAt is the instant (RFC 3339 with nanoseconds) the
	// workers start attacking, set once all of them are ready.
	AnnotationStartAt = "mesh-verify.io/start-at"
	// AnnotationStop "true" asks the workers to stop now and print their
	// final records (Ctrl-C at the coordinator).
	AnnotationStop = "mesh-verify.io/stop"
	// AnnotationExpiresAt (RFC 3339) is when the run is over whatever
	// happened to its coordinator: SweepWorkers deletes the objects of a
	// run whose expiry has passed, and no others.
	AnnotationExpiresAt = "mesh-verify.io/expires-at"

	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelRun       = "mesh-verify.io/run"
	// LabelNameValue and LabelComponentWorker are how SweepWorkers
	// recognises worker objects; the lab daemon runs every pod labelled
	// LabelName=LabelNameValue whose image is mesh-verify's.
	LabelNameValue       = "mesh-verify"
	LabelComponentWorker = "worker"
)

// Defaults and limits of a WorkerSpec.
const (
	DefaultWorkerServiceAccount = "mesh-verify-worker"
	DefaultWorkerTTL            = 300 * time.Second
	// MaxWorkers is the largest worker count: fleet.MaxWorkers, the
	// largest worker index a record may carry, so that every worker's
	// records are accepted (kube_test checks they agree).
	MaxWorkers = 10000
	// MaxWorkerDeadline bounds Deadline: a run that long is a mistake, and
	// a forgotten Job would hold its pods for that long.
	MaxWorkerDeadline = 24 * time.Hour
	// MaxWorkerTTL bounds TTL, for the same reason.
	MaxWorkerTTL = 7 * 24 * time.Hour
	// MaxWorkerConfigBytes bounds the ConfigMap's payloads (inventory and
	// run config) together, and the Secret's (scenario and CA): the API
	// server refuses a ConfigMap or a Secret over 1 MiB (data, keys and
	// metadata); the rest is room for the metadata.
	MaxWorkerConfigBytes = 1<<20 - 16<<10
	// WorkerExpiryMargin is added to Deadline for the expires-at
	// annotation: the Job's deadline runs from its start, which comes
	// after its creation, and clocks of coordinators differ.
	WorkerExpiryMargin = 10 * time.Minute
	// maxNamePrefix bounds the readable part of a worker object's name:
	// "mv-" + prefix + "-" + 8 hex digits stays far below the 63 bytes
	// of a label value (the Job's name is one, on its pods) and leaves room
	// for the pods' hostnames, "<job>-<index>".
	maxNamePrefix = 32
)

// WorkerSpec is what CreateWorkers creates: an Indexed Job of Workers pods
// running `mesh-verify worker`, and the ConfigMap and Secret they read.
type WorkerSpec struct {
	// RunID is the run's id, a valid label value (runner.NewRunID's are).
	RunID     string
	Namespace string
	// Workers is the number of pods, 1..MaxWorkers.
	Workers int
	// Image is mesh-verify's image; its entrypoint is the binary.
	Image string
	// ServiceAccount the pods run as; empty means
	// DefaultWorkerServiceAccount (`mesh-verify rbac` creates it).
	ServiceAccount string
	// Scenario is the Secret's scenario.yaml; Inventory and Run are the
	// ConfigMap's inventory.json and run.json.
	Scenario  []byte
	Inventory []byte
	Run       []byte
	// CA is the Secret's ca.pem (optional): PEM certificates only, a
	// private key is refused (measure.ReadCA reads them so).
	CA []byte
	// IndexOffset is the run's index of this Job's first worker (the
	// workers' --index-offset): with several sources the run numbers
	// every source's workers in one sequence, and pod i of this Job is
	// worker IndexOffset+i from its first record on.
	IndexOffset int
	// StartTimeout, when set, is the workers' --start-timeout: how long a
	// ready worker waits for the start signal. It must cover the
	// coordinator's wait for the slowest worker and what it does before
	// the start (the worker's own default is 2m).
	StartTimeout time.Duration
	// Deadline is the Job's activeDeadlineSeconds: the attack's duration,
	// the start timeout and a margin. A coordinator that dies cannot leave
	// workers running longer. Required, at most MaxWorkerDeadline.
	Deadline time.Duration
	// TTL is the Job's ttlSecondsAfterFinished; zero means
	// DefaultWorkerTTL.
	TTL time.Duration
	// Pod is what the scenario adds to the pod template (attack.pod).
	Pod WorkerPodTemplate
}

// The sidecars a worker follows (WorkerPodTemplate.Sidecar, the worker's
// --sidecar).
const (
	SidecarIstio = "istio"
	SidecarKuma  = "kuma"
)

// WorkerPodTemplate is what a scenario adds to the worker pods so that
// they live in a mesh like any client. The worker's own labels, security
// context, command and volumes are not overridable: the pods stay
// PodSecurity "restricted" whatever is added here.
type WorkerPodTemplate struct {
	// Labels and Annotations are added to the pod template's; a label of
	// the worker's own (workerLabels) is refused.
	Labels, Annotations map[string]string
	NodeSelector        map[string]string
	Tolerations         []corev1.Toleration
	// Resources replace the worker container's defaults per resource
	// named in either list: a cpu request given drops both default cpu
	// values, so a request is never above a default limit.
	Resources        corev1.ResourceRequirements
	ImagePullSecrets []string
	// Sidecar is the injected proxy the worker waits for and stops at the
	// end (SidecarIstio, SidecarKuma), or "" for none.
	Sidecar string
}

// validate checks what the API server would refuse, and the worker's own
// labels, with errors naming the field.
func (p WorkerPodTemplate) validate() []error {
	var errs []error
	own := workerLabels("x")
	for k, v := range p.Labels {
		if _, ok := own[k]; ok {
			errs = append(errs, fmt.Errorf("pod label %s: the worker's own label, not overridable", k))
		}
		if e := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(e) > 0 {
			errs = append(errs, fmt.Errorf("pod label %s=%q: %s", k, v, strings.Join(e, "; ")))
		}
	}
	for k, v := range p.NodeSelector {
		if e := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(e) > 0 {
			errs = append(errs, fmt.Errorf("node selector %s=%q: %s", k, v, strings.Join(e, "; ")))
		}
	}
	for k := range p.Annotations {
		if e := validation.IsQualifiedName(k); len(e) > 0 {
			errs = append(errs, fmt.Errorf("pod annotation %s: %s", k, strings.Join(e, "; ")))
		}
	}
	for _, n := range p.ImagePullSecrets {
		if e := validation.IsDNS1123Subdomain(n); len(e) > 0 {
			errs = append(errs, fmt.Errorf("image pull secret %q: %s", n, strings.Join(e, "; ")))
		}
	}
	switch p.Sidecar {
	case "", SidecarIstio, SidecarKuma:
	default:
		errs = append(errs, fmt.Errorf("sidecar %q: want %s, %s or none", p.Sidecar, SidecarIstio, SidecarKuma))
	}
	return errs
}

// workerResources are the worker container's requests and limits: small
// requests for many workers on a small cluster, no CPU limit below what a
// load generator at a few thousand requests/s uses (a throttled worker
// would show as latency of the mesh), each resource the scenario names
// replaced as a whole.
func workerResources(p WorkerPodTemplate) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	for _, named := range []corev1.ResourceList{p.Resources.Requests, p.Resources.Limits} {
		for name := range named {
			delete(r.Requests, name)
			delete(r.Limits, name)
		}
	}
	maps.Copy(r.Requests, p.Resources.Requests)
	maps.Copy(r.Limits, p.Resources.Limits)
	return r
}

// WorkerRun is a created worker Job, its ConfigMap and its Secret.
type WorkerRun struct {
	Cluster   *Cluster
	Namespace string
	// Name is the Job's, the ConfigMap's and the Secret's.
	Name    string
	RunID   string
	JobUID  types.UID
	Workers int
	// ExpiresAt is the expires-at annotation's instant.
	ExpiresAt time.Time
}

// WorkerName is the name of a run's Job and ConfigMap: "mv-", the run id
// lowercased with every character a DNS label cannot hold replaced by
// "-" (at most 32 of them), and 8 hex digits of the run id's SHA-256, so
// that two run ids never share a name however similar they read.
func WorkerName(runID string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(runID) {
		if b.Len() >= maxNamePrefix {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	prefix := strings.TrimRight(b.String(), "-")
	sum := sha256.Sum256([]byte(runID))
	h := hex.EncodeToString(sum[:4])
	if prefix == "" {
		return "mv-" + h
	}
	return "mv-" + prefix + "-" + h
}

// Validate checks a spec before anything is created.
func (s WorkerSpec) Validate() error {
	var errs []error
	if s.RunID == "" {
		errs = append(errs, errors.New("no run id"))
	} else if e := validation.IsValidLabelValue(s.RunID); len(e) > 0 {
		errs = append(errs, fmt.Errorf("run id %q is no label value: %s", s.RunID, strings.Join(e, "; ")))
	}
	if e := validation.IsDNS1123Label(s.Namespace); len(e) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", s.Namespace, strings.Join(e, "; ")))
	}
	if s.Workers < 1 || s.Workers > MaxWorkers {
		errs = append(errs, fmt.Errorf("workers %d: want 1 to %d", s.Workers, MaxWorkers))
	} else if s.IndexOffset < 0 || s.IndexOffset+s.Workers > MaxWorkers {
		errs = append(errs, fmt.Errorf("index offset %d: want 0 to %d for %d workers", s.IndexOffset, MaxWorkers-s.Workers, s.Workers))
	}
	if strings.TrimSpace(s.Image) == "" || strings.ContainsAny(s.Image, " \t\n") {
		errs = append(errs, fmt.Errorf("image %q: want an image reference", s.Image))
	}
	if s.ServiceAccount != "" {
		if e := validation.IsDNS1123Subdomain(s.ServiceAccount); len(e) > 0 {
			errs = append(errs, fmt.Errorf("service account %q: %s", s.ServiceAccount, strings.Join(e, "; ")))
		}
	}
	if n := len(s.Inventory) + len(s.Run); n > MaxWorkerConfigBytes {
		errs = append(errs, fmt.Errorf("inventory and run config are %d bytes together: the workers' ConfigMap holds at most %d", n, MaxWorkerConfigBytes))
	}
	if n := len(s.Scenario) + len(s.CA); n > MaxWorkerConfigBytes {
		errs = append(errs, fmt.Errorf("scenario and CA are %d bytes together: the workers' Secret holds at most %d", n, MaxWorkerConfigBytes))
	}
	if len(s.CA) > 0 {
		// Only what the workers need: never a key that came with the
		// authorities (the error names the block, never its bytes).
		if _, err := certpem.Certificates(s.CA); err != nil {
			errs = append(errs, fmt.Errorf("ca: %w", err))
		}
	}
	if len(s.Scenario) == 0 || len(s.Run) == 0 {
		errs = append(errs, errors.New("no scenario or run config"))
	}
	if len(s.Inventory) > 0 && !json.Valid(s.Inventory) {
		errs = append(errs, errors.New("inventory is not JSON"))
	}
	if len(s.Run) > 0 && !json.Valid(s.Run) {
		errs = append(errs, errors.New("run config is not JSON"))
	}
	if s.Deadline < time.Second || s.Deadline > MaxWorkerDeadline {
		errs = append(errs, fmt.Errorf("deadline %s: want 1s to %s", s.Deadline, MaxWorkerDeadline))
	}
	errs = append(errs, s.Pod.validate()...)
	if s.TTL < 0 || s.TTL > MaxWorkerTTL {
		errs = append(errs, fmt.Errorf("ttl %s: want 0 (the default, %s) to %s", s.TTL, DefaultWorkerTTL, MaxWorkerTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("worker spec: %w", err)
	}
	return nil
}

// workerLabels are on the Job, its pod template and the ConfigMap.
func workerLabels(runID string) map[string]string {
	return map[string]string{LabelName: LabelNameValue, LabelComponent: LabelComponentWorker, LabelRun: runID}
}

// workerSelector selects the worker objects of every run.
func workerSelector() string {
	return labels.SelectorFromSet(labels.Set{LabelName: LabelNameValue, LabelComponent: LabelComponentWorker}).String()
}

// seconds rounds d up to whole seconds, as the Job's fields count.
func seconds(d time.Duration) *int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return &s
}

// workerJob is the Job of a spec: created suspended, so that no pod starts
// before its ConfigMap exists (CreateWorkers).
func workerJob(s WorkerSpec, name string, expires time.Time) *batchv1.Job {
	n := int32(s.Workers)
	zero := int32(0)
	// Every index may fail once (and is not retried): the Job ends when
	// each worker has, whatever the others did.
	maxFailures := n
	ttl := int32(*seconds(cmp.Or(s.TTL, DefaultWorkerTTL)))
	yes, no := true, false
	nonRoot := int64(65532) // the image's USER (Dockerfile)
	mode := batchv1.IndexedCompletion
	// The scenario's labels first: the worker's own win (Validate refuses
	// them anyway).
	podLabels := maps.Clone(s.Pod.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, workerLabels(s.RunID))
	var pullSecrets []corev1.LocalObjectReference
	for _, n := range s.Pod.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: n})
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.Namespace, Labels: workerLabels(s.RunID),
			Annotations: map[string]string{AnnotationExpiresAt: expires.UTC().Format(time.RFC3339)},
		},
		Spec: batchv1.JobSpec{
			CompletionMode: &mode,
			Completions:    &n,
			Parallelism:    &n,
			// A retried worker would send its share twice and print a
			// second set of records under the same index: no index is
			// retried. Per index, not for the whole Job: with backoffLimit
			// 0 one worker that dies makes the Job controller stop every
			// other one, and a run loses all its workers for one.
			BackoffLimitPerIndex:    &zero,
			BackoffLimit:            &maxFailures,
			TTLSecondsAfterFinished: &ttl,
			ActiveDeadlineSeconds:   seconds(s.Deadline),
			Suspend:                 &yes,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(s.Pod.Annotations)},
				Spec: corev1.PodSpec{
					NodeSelector:       maps.Clone(s.Pod.NodeSelector),
					Tolerations:        slices.Clone(s.Pod.Tolerations),
					ImagePullSecrets:   pullSecrets,
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: cmp.Or(s.ServiceAccount, DefaultWorkerServiceAccount),
					// The worker reads its ConfigMap with the pod's token.
					AutomountServiceAccountToken: &yes,
					// A Service's variables in every pod of a busy namespace are
					// noise the worker never reads.
					EnableServiceLinks: &no,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   &yes,
						RunAsUser:      &nonRoot,
						RunAsGroup:     &nonRoot,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "worker",
						Image: s.Image,
						Args:  workerArgs(s, name),
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						Resources: workerResources(s.Pod),
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no,
							ReadOnlyRootFilesystem:   &yes,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
					}},
					// The root filesystem is read-only; a temporary file (Go's
					// os.TempDir) still has somewhere to go.
					Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// ConfigMapData is the data of the workers' ConfigMap: inventory.json
// ("[]" for none) and run.json, nothing secret. Anyone who may view the
// namespace reads a ConfigMap, and its every change is a watch event.
func (s WorkerSpec) ConfigMapData() map[string]string {
	data := map[string]string{WorkerKeyRun: string(s.Run), WorkerKeyInventory: "[]"}
	if len(s.Inventory) > 0 {
		data[WorkerKeyInventory] = string(s.Inventory)
	}
	return data
}

// SecretData is the data of the workers' Secret: scenario.yaml (its
// attack.headers values are often credentials) and, when set, ca.pem.
func (s WorkerSpec) SecretData() map[string][]byte {
	data := map[string][]byte{WorkerKeyScenario: s.Scenario}
	if len(s.CA) > 0 {
		data[WorkerKeyCA] = s.CA
	}
	return data
}

// workerArgs is the worker container's command line; the Secret has the
// ConfigMap's name.
func workerArgs(s WorkerSpec, name string) []string {
	args := []string{"worker", "--configmap", name, "--namespace", s.Namespace}
	if s.IndexOffset > 0 {
		args = append(args, "--index-offset", strconv.Itoa(s.IndexOffset))
	}
	if s.StartTimeout > 0 {
		args = append(args, "--start-timeout", s.StartTimeout.String())
	}
	if s.Pod.Sidecar != "" {
		args = append(args, "--sidecar", s.Pod.Sidecar)
	}
	return args
}

// CreateWorkers creates a run's worker Job, Secret and ConfigMap in
// spec.Namespace. The Job is created suspended, then the Secret and the
// ConfigMap owned by it (deleting the Job garbage-collects both, and
// neither outlives its Job), then the Job is resumed: its pods never start
// before what they read exists. The Secret is immutable: nothing can
// swap the scenario under running workers. On any failure what was
// created is deleted again.
func (c *Cluster) CreateWorkers(ctx context.Context, spec WorkerSpec) (*WorkerRun, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return c.createWorkers(ctx, spec, time.Now())
}

func (c *Cluster) createWorkers(ctx context.Context, spec WorkerSpec, now time.Time) (*WorkerRun, error) {
	name := WorkerName(spec.RunID)
	ns := spec.Namespace
	expires := now.Add(spec.Deadline + WorkerExpiryMargin).Truncate(time.Second).Add(time.Second)
	// Without its ServiceAccount the Job controller cannot create a single
	// pod (it says so only in an Event): refuse before anything exists.
	sa := cmp.Or(spec.ServiceAccount, DefaultWorkerServiceAccount)
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, c.wrap(fmt.Sprintf("get serviceaccounts %s in namespace %s", sa, ns),
				fmt.Errorf("the workers' ServiceAccount does not exist: apply `mesh-verify rbac SCENARIO --cluster %s` there, or set attack.serviceAccount (%w)", c.Name, err))
		}
		return nil, c.wrap(fmt.Sprintf("get serviceaccounts %s in namespace %s", sa, ns), err)
	}
	jobs := c.Client.BatchV1().Jobs(ns)
	job, err := jobs.Create(ctx, workerJob(spec, name, expires), metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, c.wrap(fmt.Sprintf("create jobs.batch %s in namespace %s", name, ns),
				fmt.Errorf("a Job of that name exists: run id %s was used before (%w)", spec.RunID, err))
		}
		return nil, c.wrap(fmt.Sprintf("create jobs.batch %s in namespace %s", name, ns), err)
	}
	w := &WorkerRun{Cluster: c, Namespace: ns, Name: name, RunID: spec.RunID, JobUID: job.UID, Workers: spec.Workers, ExpiresAt: expires}
	undo := func(err error) (*WorkerRun, error) {
		// The caller's context may be what failed: the cleanup gets its own.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := w.Delete(dctx); derr != nil {
			return nil, errors.Join(err, fmt.Errorf("clean up after the failure: %w", derr))
		}
		return nil, err
	}
	if job.Spec.BackoffLimitPerIndex == nil {
		// An API server before Kubernetes 1.29 (or with the
		// JobBackoffLimitPerIndex feature off) drops the field, and its
		// default backoffLimit would retry a dead worker: its share sent
		// twice.
		return undo(c.wrap(fmt.Sprintf("create jobs.batch %s in namespace %s", name, ns),
			errors.New("the API server dropped spec.backoffLimitPerIndex: distributed workers need Kubernetes 1.29 or later (the JobBackoffLimitPerIndex feature), so that a dead worker is never retried")))
	}
	meta := metav1.ObjectMeta{
		Name: name, Namespace: ns, Labels: workerLabels(spec.RunID),
		Annotations: map[string]string{AnnotationExpiresAt: expires.UTC().Format(time.RFC3339)},
		// No blockOwnerDeletion: it only matters to a foreground
		// deletion, and setting it needs update on jobs/finalizers
		// where the OwnerReferencesPermissionEnforcement admission
		// plugin runs.
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: job.UID}},
	}
	immutable := true
	secret := &corev1.Secret{ObjectMeta: *meta.DeepCopy(), Immutable: &immutable, Type: corev1.SecretTypeOpaque, Data: spec.SecretData()}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return undo(c.wrap(fmt.Sprintf("create secrets %s in namespace %s", name, ns), err))
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta, Data: spec.ConfigMapData()}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return undo(c.wrap(fmt.Sprintf("create configmaps %s in namespace %s", name, ns), err))
	}
	resume := []byte(`{"spec":{"suspend":false}}`)
	if _, err := jobs.Patch(ctx, name, types.MergePatchType, resume, metav1.PatchOptions{}); err != nil {
		return undo(c.wrap(fmt.Sprintf("patch jobs.batch %s in namespace %s (resume it)", name, ns), err))
	}
	return w, nil
}

// Start sets the start-at annotation the workers wait for.
func (w *WorkerRun) Start(ctx context.Context, at time.Time) error {
	return w.annotate(ctx, AnnotationStartAt, at.UTC().Format(time.RFC3339Nano), "start the workers")
}

// Stop sets the stop annotation: the workers stop attacking and print
// their final records.
func (w *WorkerRun) Stop(ctx context.Context) error {
	return w.annotate(ctx, AnnotationStop, "true", "stop the workers")
}

func (w *WorkerRun) annotate(ctx context.Context, key, value, why string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return fmt.Errorf("encode the %s annotation: %w", key, err)
	}
	_, err = w.Cluster.Client.CoreV1().ConfigMaps(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return w.Cluster.wrap(fmt.Sprintf("patch configmaps %s in namespace %s (%s)", w.Name, w.Namespace, why), err)
}

// WorkerPod is one pod of a worker Job as the API server last saw it.
type WorkerPod struct {
	Name string
	// Index is the Job completion index (the worker's number); -1 when the
	// pod carries none the Job controller would have set.
	Index int
	Phase corev1.PodPhase
	// State of the worker container: "waiting", "running", "terminated"
	// or "" before the kubelet reported any.
	State string
	// Reason and Message of the container's state (ErrImagePull,
	// OOMKilled, Error, DeadlineExceeded ...), or of the pod when the
	// container has none.
	Reason, Message string
	// ExitCode is meaningful when State is "terminated".
	ExitCode int32
	// Deleting: the pod has a deletion timestamp.
	Deleting bool
	// Unschedulable: the scheduler found no node for the pod (condition
	// PodScheduled False, reason Unschedulable); Reason and Message are
	// the condition's when the container has none.
	Unschedulable bool
}

// StartFailure is why a pod that has not started will not start without
// a change: its image cannot be pulled (ErrImagePull, ImagePullBackOff,
// InvalidImageName, ErrImageNeverPull) or no node can take it
// (Unschedulable); "" when neither. A coordinator reports it at once
// instead of waiting for the worker's ready record.
func (p WorkerPod) StartFailure() string {
	// The kubelet's waiting reasons for an image it cannot pull or name:
	// the pod will not start without a change to the image or its pull
	// secrets.
	imageFailure := false
	switch p.Reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		imageFailure = true
	}
	switch {
	case p.State == "waiting" && imageFailure:
		return p.Reason
	case p.Unschedulable && p.State == "":
		return "Unschedulable"
	}
	return ""
}

// Failed reports a worker that ended without success.
func (p WorkerPod) Failed() bool {
	return p.Phase == corev1.PodFailed || (p.State == "terminated" && p.ExitCode != 0)
}

// parseCompletionIndex reads the Job controller's completion index
// annotation: a decimal in [0, MaxWorkers).
func parseCompletionIndex(s string) (int, bool) {
	// Exactly the controller's strconv.Itoa form: digits, no sign, no
	// leading zero.
	if s == "" || len(s) > 5 || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return -1, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= MaxWorkers {
		return -1, false
	}
	return n, true
}

// workerPod reads what the coordinator needs of a pod.
func workerPod(p *corev1.Pod) WorkerPod {
	out := WorkerPod{Name: p.Name, Index: -1, Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message, Deleting: p.DeletionTimestamp != nil}
	// The annotation is on every Indexed Job's pod; the label of the same
	// name only from Kubernetes 1.28.
	if i, ok := parseCompletionIndex(p.Annotations[batchv1.JobCompletionIndexAnnotation]); ok {
		out.Index = i
	} else if i, ok := parseCompletionIndex(p.Labels[batchv1.JobCompletionIndexAnnotation]); ok {
		out.Index = i
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			out.Unschedulable = true
			out.Reason, out.Message = cmp.Or(out.Reason, c.Reason), cmp.Or(out.Message, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != "worker" {
			continue
		}
		switch st := cs.State; {
		case st.Terminated != nil:
			out.State, out.ExitCode = "terminated", st.Terminated.ExitCode
			out.Reason, out.Message = cmp.Or(st.Terminated.Reason, out.Reason), cmp.Or(st.Terminated.Message, out.Message)
		case st.Running != nil:
			out.State = "running"
		case st.Waiting != nil:
			out.State = "waiting"
			out.Reason, out.Message = cmp.Or(st.Waiting.Reason, out.Reason), cmp.Or(st.Waiting.Message, out.Message)
		}
	}
	return out
}

// Pods lists the Job's pods, by index then name (a pod the Job controller
// replaced, which backoffLimitPerIndex 0 should prevent, shows as a second pod of
// its index).
func (w *WorkerRun) Pods(ctx context.Context) ([]WorkerPod, error) {
	list, err := w.Cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(workerLabels(w.RunID)).String(),
	})
	if err != nil {
		return nil, w.Cluster.wrap(fmt.Sprintf("list pods of job %s in namespace %s", w.Name, w.Namespace), err)
	}
	out := make([]WorkerPod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		// Only this Job's: the labels name the run, the owner the Job.
		if !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == w.JobUID }) {
			continue
		}
		out = append(out, workerPod(p))
	}
	slices.SortFunc(out, func(a, b WorkerPod) int { return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Name, b.Name)) })
	return out, nil
}

// Limits of WatchPods.
const (
	// MaxWatchFailures is how many list or watch failures in a row
	// WatchPods takes before it gives up; a watch that ends within
	// minWatchLife counts as one, so a server that closes every watch at
	// once cannot make it spin.
	MaxWatchFailures = 5
	minWatchLife     = time.Second
	watchBackoff     = 500 * time.Millisecond
)

// WatchPods calls fn with the Job's pods, as Pods returns them, at once
// and after every change the API server reports (a pod created, its
// container ending, a pod deleted), until ctx ends (nil) or the API
// server fails MaxWatchFailures times in a row. A denied list or watch
// is returned at once. fn runs on the caller's goroutine and must not
// keep the slice.
func (w *WorkerRun) WatchPods(ctx context.Context, fn func([]WorkerPod)) error {
	pods := w.Cluster.Client.CoreV1().Pods(w.Namespace)
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(workerLabels(w.RunID)).String()}
	ours := func(p *corev1.Pod) bool {
		return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == w.JobUID })
	}
	emit := func(byName map[string]WorkerPod) {
		out := slices.Collect(maps.Values(byName))
		slices.SortFunc(out, func(a, b WorkerPod) int { return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Name, b.Name)) })
		fn(out)
	}
	failures := 0
	fail := func(call string, err error) error {
		failures++
		if IsDenied(err) || failures >= MaxWatchFailures {
			return w.Cluster.wrap(fmt.Sprintf("%s pods of job %s in namespace %s", call, w.Name, w.Namespace), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(watchBackoff * time.Duration(failures)):
		}
		return nil
	}
	for ctx.Err() == nil {
		list, err := pods.List(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if err := fail("list", err); err != nil {
				return err
			}
			continue
		}
		byName := map[string]WorkerPod{}
		for i := range list.Items {
			if p := &list.Items[i]; ours(p) {
				byName[p.Name] = workerPod(p)
			}
		}
		emit(byName)
		wopts := opts
		wopts.ResourceVersion = list.ResourceVersion
		wi, err := pods.Watch(ctx, wopts)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if err := fail("watch", err); err != nil {
				return err
			}
			continue
		}
		opened := time.Now()
		var werr error
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				werr = apierrors.FromObject(ev.Object) // e.g. 410 Gone: list again
				break
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !ours(p) {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(byName, p.Name)
			} else {
				byName[p.Name] = workerPod(p)
			}
			emit(byName)
		}
		wi.Stop()
		if ctx.Err() != nil {
			break
		}
		if time.Since(opened) >= minWatchLife && !IsDenied(werr) {
			failures = 0
			continue
		}
		if err := fail("watch", cmp.Or(werr, errors.New("the watch ended at once"))); err != nil {
			return err
		}
	}
	return nil
}

// WorkerJobStatus is the worker Job's status as the Job controller
// reports it.
type WorkerJobStatus struct {
	// Active, Ready, Succeeded and Failed count pods.
	Active, Ready, Succeeded, Failed int
	// Done: the Job completed or failed, or the Job controller decided
	// so and is terminating its pods (conditions SuccessCriteriaMet and
	// FailureTarget, which come first by the pods' grace period); Reason
	// and Message of a failure (DeadlineExceeded, BackoffLimitExceeded)
	// are then set.
	Done, Complete  bool
	Reason, Message string
	// Suspended: not resumed yet.
	Suspended bool
}

// JobStatus sums up a worker Job's status. The coordinator does not read
// it (it follows the pods and their logs, so the generated Role has no
// get on jobs); it is for tooling and tests that can read the Job.
func JobStatus(job *batchv1.Job) WorkerJobStatus {
	st := WorkerJobStatus{Active: int(job.Status.Active), Succeeded: int(job.Status.Succeeded), Failed: int(job.Status.Failed),
		Suspended: job.Spec.Suspend != nil && *job.Spec.Suspend}
	if job.Status.Ready != nil {
		st.Ready = int(*job.Status.Ready)
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			st.Done, st.Complete = true, true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			st.Done, st.Reason, st.Message = true, c.Reason, c.Message
		}
	}
	return st
}

// background deletes an object's dependents after it: the Job's pods,
// ConfigMap and Secret go through the garbage collector.
func background() metav1.DeleteOptions {
	p := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &p}
}

// Delete deletes the Job; the garbage collector deletes its pods,
// ConfigMap and Secret. A Job already gone is no error.
func (w *WorkerRun) Delete(ctx context.Context) error {
	opts := background()
	opts.Preconditions = &metav1.Preconditions{UID: &w.JobUID} // never a later Job of the same name
	err := w.Cluster.Client.BatchV1().Jobs(w.Namespace).Delete(ctx, w.Name, opts)
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return w.Cluster.wrap(fmt.Sprintf("delete jobs.batch %s in namespace %s", w.Name, w.Namespace), err)
}

// expired reports whether an object's expires-at annotation has passed;
// an object without a readable one is never expired (it may be a live
// run's of another version, or not ours).
func expired(annotations map[string]string, now time.Time) bool {
	at, err := time.Parse(time.RFC3339, annotations[AnnotationExpiresAt])
	return err == nil && !now.Before(at)
}

// SweepWorkers deletes the worker Jobs and ConfigMaps in namespace ns
// whose expires-at has passed at now: what a coordinator that crashed (or
// was killed) left behind. A live run's objects are not expired and are
// never touched. It returns what it deleted, as "job/NAME" and
// "configmap/NAME".
func (c *Cluster) SweepWorkers(ctx context.Context, ns string, now time.Time) ([]string, error) {
	sel := metav1.ListOptions{LabelSelector: workerSelector()}
	var deleted []string
	jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("list jobs.batch in namespace %s (sweep leftover workers)", ns), err)
	}
	for _, j := range jobs.Items {
		if !expired(j.Annotations, now) {
			continue
		}
		opts := background()
		opts.Preconditions = &metav1.Preconditions{UID: &j.UID}
		if err := c.Client.BatchV1().Jobs(ns).Delete(ctx, j.Name, opts); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue // deleted meanwhile: not by this sweep
			}
			return deleted, c.wrap(fmt.Sprintf("delete jobs.batch %s in namespace %s (expired %s)", j.Name, ns, j.Annotations[AnnotationExpiresAt]), err)
		}
		deleted = append(deleted, "job/"+j.Name)
	}
	// A ConfigMap goes with its Job; one left without (its Job deleted
	// with orphan propagation) expires like it. Secrets are not listed
	// (that would read every Secret of the namespace): one goes with its
	// Job only.
	cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		return deleted, c.wrap(fmt.Sprintf("list configmaps in namespace %s (sweep leftover workers)", ns), err)
	}
	for _, cm := range cms.Items {
		if !expired(cm.Annotations, now) || cm.DeletionTimestamp != nil {
			continue
		}
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}}
		if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, opts); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue // its Job's garbage collection was first
			}
			return deleted, c.wrap(fmt.Sprintf("delete configmaps %s in namespace %s (expired %s)", cm.Name, ns, cm.Annotations[AnnotationExpiresAt]), err)
		}
		deleted = append(deleted, "configmap/"+cm.Name)
	}
	return deleted, nil
}
