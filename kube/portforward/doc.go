// Package portforward is mesh-verify's in-process port-forward through a
// cluster's API server: a target (pod, Service or Deployment, resolved to
// one pod as kubectl does; target.go), a Tunnel whose DialContext plugs
// into an http.Transport and opens one stream pair per connection on a
// shared streaming connection (SPDY over WebSocket, falling back to SPDY;
// tunnel.go, wsdial.go, spdyconn.go), Serve for a local listener (`mesh-verify
// port-forward`), and ScrapeVia for a pod's metrics through it. The
// connection to the cluster is kube's (kube.Cluster); a refused upgrade is
// a kube.ClusterError whose reason is Forbidden or Unauthorized.
package portforward
