package kclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Object is a Kubernetes object with metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// Resource is one resource of one namespace (or a cluster-scoped one):
// the verbs of client-go's typed clients, with their signatures, so
// client-go's typed interfaces (a fake's included) satisfy it.
type Resource[T Object, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// resource implements Resource as client-go's gentype does (which is not
// used: it drags in apply configurations, structured-merge-diff and
// OpenAPI for server-side apply, which mesh-verify never calls).
// Built-in types prefer protobuf, as client-go's generated clients ask.
type resource[T Object, L runtime.Object] struct {
	g        *group
	resource string
	ns       string
	newObj   func() T
	newList  func() L
}

func newResource[T Object, L runtime.Object](g *group, res, ns string, newObj func() T, newList func() L) *resource[T, L] {
	return &resource[T, L]{g: g, resource: res, ns: ns, newObj: newObj, newList: newList}
}

// timeout is a list or watch's server-side timeout as the client's too.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

func (r *resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObj()
	err := r.g.rc.Get().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		VersionedParams(&opts, r.g.params).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.g.rc.Get().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, r.g.params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.g.rc.Get().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, r.g.params).Timeout(timeout(opts)).Watch(ctx)
}

func (r *resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObj()
	err := r.g.rc.Post().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, r.g.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.g.rc.Put().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(obj.GetName()).
		VersionedParams(&opts, r.g.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.g.rc.Put().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(obj.GetName()).
		SubResource("status").VersionedParams(&opts, r.g.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.g.rc.Delete().UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		Body(&opts).Do(ctx).Error()
}

func (r *resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObj()
	err := r.g.rc.Patch(pt).UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		SubResource(subresources...).VersionedParams(&opts, r.g.params).Body(data).Do(ctx).Into(out)
	return out, err
}
