package daemon

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/lab/sidecar"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// podSidecar is a pod's mesh sidecar container: the inbound proxy in
// front of its app and the log its outbound data plane writes to too.
type podSidecar struct {
	sc  *sidecar.Sidecar
	log *crilog.Log
}

// logFile is where a container of a pod logs: logs/<cluster>/<ns>_<pod>_<container>.log.
func (d *Daemon) logFile(ref podRef, container string) string {
	return filepath.Join(d.cfg.Dir, "logs", ref.cluster, fmt.Sprintf("%s_%s_%s.log", ref.namespace, ref.name, container))
}

// podSeed derives an app pod's seed from the lab's like entrySeed does for
// simulators: from the app, its cluster and the how-manieth pod of that app
// the daemon started, not the generated pod name, so a lab started with the
// same seed replays the same apps.
func (d *Daemon) podSeed(ref podRef, app string) uint64 {
	d.mu.Lock()
	instance := d.instances["app:"+app+"@"+ref.cluster]
	d.instances["app:"+app+"@"+ref.cluster]++
	d.mu.Unlock()
	return entrySeed(d.cfg.Seed, "app:"+app, ref.cluster, instance)
}

// newSidecar readies app a's sidecar for the pod ref; nil when a has none.
func (d *Daemon) newSidecar(ref podRef, a *topology.App) (*podSidecar, error) {
	if a.Sidecar == "" {
		return nil, nil
	}
	svcPort := a.Port.Number
	if s := d.cfg.Topology.ServiceByName(a.Namespace, a.Service); s != nil {
		svcPort = s.Port
	}
	log, err := crilog.Open(d.logFile(ref, sidecar.Container(a.Sidecar)))
	if err != nil {
		return nil, err
	}
	sc, err := sidecar.New(sidecar.Spec{
		Flavor: a.Sidecar, Pod: ref.name, Namespace: ref.namespace, Cluster: ref.cluster,
		Workload: a.Name, App: a.Service, Service: a.Service, Version: a.Version,
		Port: a.Port.Number, ServicePort: svcPort, Log: log,
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	if a.Sidecar == sidecar.Kuma {
		d.mu.Lock()
		sc.SetInboundLog(!d.kumaNoInbound)
		d.mu.Unlock()
	}
	return &podSidecar{sc: sc, log: log}, nil
}

// startProxy puts the pod's sidecar, if it has one, in front of its
// started app and records it in the pod's status.
func (d *Daemon) startProxy(ctx context.Context, ref podRef, rt *podRT, flavor string) error {
	if rt.proxy == nil {
		return nil
	}
	if err := rt.proxy.sc.Start(ctx, rt.server.Addr(), "127.0.0.1:0", "127.0.0.1:0"); err != nil {
		return err
	}
	rt.status.SidecarFlavor, rt.status.SidecarContainer = flavor, sidecar.Container(flavor)
	rt.status.SidecarLogFile = d.logFile(ref, rt.status.SidecarContainer)
	rt.status.SidecarInbound, rt.status.SidecarMetrics = rt.proxy.sc.Addr(), rt.proxy.sc.MetricsAddr()
	return nil
}

func (p *podSidecar) close() {
	_ = p.sc.Close()
	_ = p.log.Close()
}

// proxying is how entry e's data plane treats requests: as Envoy when the
// mesh's proxy is one (an Istio or Kuma sidecar or gateway), writing its
// access lines to the pod's sidecar (a sidecar entry) or to the gateway
// pod's log.
func (d *Daemon) proxying(e *topology.Entry, sc *podSidecar, elog *entryLog) meshsim.Proxying {
	format := d.cfg.Topology.Envoy(e)
	if format == "" {
		return meshsim.Proxying{}
	}
	px := meshsim.Proxying{Envoy: true, Edge: e.Edge}
	switch {
	case sc != nil:
		px.AccessLog = func(a meshsim.Access) { sc.sc.Outbound(a.Entry, d.destination(e, a.Backend)) }
	case elog != nil:
		px.AccessLog = func(a meshsim.Access) {
			rec := a.Entry
			if a.Backend.Pod != "" {
				rec = sidecar.OutboundEntry(format, rec, d.destination(e, a.Backend))
			}
			if line, err := envoylog.Format(format, rec); err == nil {
				elog.Raw(line)
			}
		}
	}
	if log := px.AccessLog; log != nil && len(d.cfg.Topology.Networks) > 0 {
		// A multi-network mesh: Envoy names the endpoint as the mesh
		// knows it, a pod IP on its own network, the remote network's
		// gateway otherwise.
		px.AccessLog = func(a meshsim.Access) {
			a.Entry.UpstreamHost = d.upstreamHost(e, a.Backend, a.Entry.UpstreamHost)
			log(a)
		}
	}
	return px
}

// destination describes the pod backend b of entry e for an outbound record.
func (d *Daemon) destination(e *topology.Entry, b meshsim.Backend) sidecar.Destination {
	dst := sidecar.Destination{Service: e.To, Namespace: e.Namespace, Version: b.Version, Cluster: b.Cluster, App: e.To}
	if s := d.cfg.Topology.ServiceByName(e.Namespace, e.To); s != nil {
		dst.Port = s.Port
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// The subset the VirtualService routes this version to.
	dst.Subset = routeOf(d.routes[e.Name]).Subsets[b.Version]
	if rt := d.pods[podRef{cluster: b.Cluster, namespace: e.Namespace, name: b.Pod}]; rt != nil {
		dst.Workload = rt.status.App
	}
	return dst
}

// forward is one pod port and where kwok's port-forward takes it.
type forward struct {
	port int32
	addr string
}

// containerLog is one container of a pod and its log file.
type containerLog struct {
	container, file string
}

// kwokTargets are the logs and forwards of an app pod: the app's
// container and port, and for a sidecar its container and metrics ports.
// The app's own port goes straight to the app, as `kubectl port-forward`
// does on a real mesh (it connects inside the pod, past the redirection
// that puts the sidecar in front of mesh traffic).
func (rt *podRT) kwokTargets() ([]containerLog, []forward) {
	logs := []containerLog{{rt.status.Container, rt.status.LogFile}}
	// The pod's own port goes through its relay (lab/relay); the sidecar's
	// metrics ports answer short scrapes and need none.
	fwds := []forward{{rt.status.Port, cmp.Or(rt.status.Forward, rt.status.Addr)}}
	if rt.proxy != nil {
		logs = append(logs, containerLog{rt.status.SidecarContainer, rt.status.SidecarLogFile})
		for _, p := range sidecar.MetricsPorts(rt.status.SidecarFlavor) {
			fwds = append(fwds, forward{p, rt.proxy.sc.MetricsAddr()})
		}
	}
	return logs, fwds
}

// inboundAddr is where the mesh sends the pod's traffic: its sidecar when
// it has one, else the app.
func (rt *podRT) inboundAddr() string {
	if rt.proxy != nil {
		return rt.proxy.sc.Addr()
	}
	return rt.server.Addr()
}
