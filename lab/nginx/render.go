// Package nginx plays a lab mesh entry's data plane with Debian's nginx
// instead of the mesh simulator (lab/meshsim): the routing is then done by
// a third party's code — smooth weighted round robin in an upstream,
// split_clients, the mirror module — so a test that checks mesh-verify's
// measurements against it does not check our routing against itself.
//
// nginx cannot play every policy: it has no notion of Skupper's open
// connections + link cost, and it picks per request, not per inbound
// connection. Supports says which policies it can play; the rest stay
// with the simulator.
package nginx

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// GenerationPath answers the generation of the configuration nginx
// serves, so a reload can be waited for; it is not passed to any app.
const GenerationPath = "/__mesh-verify-lab/generation"

// mirrorPath is the internal location the mirror module sends copies to.
const mirrorPath = "/__mesh-verify-lab/mirror"

// Supports reports why nginx cannot play p, or nil. A policy the
// simulator refuses (no weights, no failover order…) is refused here too.
func Supports(p meshsim.Policy) error {
	if _, err := meshsim.New(p); err != nil {
		return err
	}
	switch p.Mode {
	case meshsim.ModeBalanced:
		return fmt.Errorf("mode %s needs open connections + link cost per TCP connection (Skupper's router), which nginx does not do; use the simulator", p.Mode)
	case meshsim.ModePerCluster, meshsim.ModePerPod, meshsim.ModeWeighted, meshsim.ModeFailover:
	default:
		return fmt.Errorf("unknown mode %q", p.Mode)
	}
	if p.PerConnection {
		return fmt.Errorf("perConnection: nginx picks an upstream per request, not per inbound connection; use the simulator")
	}
	// The rendered configuration has one location that proxies every
	// request: it would serve what Envoy answers 404 (NR).
	if p.NoRoute != "" {
		return fmt.Errorf("no route (%s): Envoy answers every request 404, nginx's configuration would serve them; use the simulator", p.NoRoute)
	}
	if p.Match != nil {
		return fmt.Errorf("match conditions (hosts, URIs) are not rendered into nginx's configuration; use the simulator")
	}
	return nil
}

// Conf is what a configuration is rendered for besides the policy.
type Conf struct {
	// Dir holds nginx's pid file, logs and temp directories.
	Dir string
	// Listen is the loopback address nginx listens on, "127.0.0.1:port".
	Listen string
	// Generation is answered at GenerationPath.
	Generation int
}

// upstream is one rendered upstream block: servers with weights.
type upstream struct {
	name    string
	servers []string // "127.0.0.1:port weight=N"
}

// Render writes the nginx configuration that routes by p over the ready
// backends bs, mirroring as p.Mirror says. Groups are chosen by
// split_clients keyed on nginx's own random $request_id (with a different
// suffix for the mirror choice, so the two choices are independent);
// pods within a group by the upstream's smooth weighted round robin.
func Render(p meshsim.Policy, bs []meshsim.Backend, c Conf) (string, error) {
	if err := Supports(p); err != nil {
		return "", err
	}
	var primary, mirror []meshsim.Backend
	for _, b := range bs {
		switch {
		case !b.Ready:
		case p.Mirror.Takes(b):
			mirror = append(mirror, b)
		default:
			primary = append(primary, b)
		}
	}
	meshsim.SortBackends(primary)
	meshsim.SortBackends(mirror)

	var ups []upstream
	var split string // a split_clients block choosing the upstream, if any
	var route string // the location's routing directives
	switch p.Mode {
	case meshsim.ModePerPod:
		ups, route = single("pods", primary, nil)
	case meshsim.ModePerCluster:
		// Equal per cluster, then equal per pod: pod weight L/n_c with L
		// the least common multiple of the clusters' pod counts — a
		// weighted upstream, which nginx walks by smooth WRR.
		counts := map[string]int{}
		for _, b := range primary {
			counts[b.Cluster]++
		}
		l := 1
		for _, n := range counts {
			l = lcm(l, n)
		}
		ups, route = single("clusters", primary, func(b meshsim.Backend) int { return l / counts[b.Cluster] })
	case meshsim.ModeFailover:
		var pods []meshsim.Backend
		for _, cl := range p.Order {
			for _, b := range primary {
				if b.Cluster == cl {
					pods = append(pods, b)
				}
			}
			if len(pods) > 0 {
				break
			}
		}
		ups, route = single("failover", pods, nil)
	case meshsim.ModeWeighted:
		ups, split, route = weighted(p, primary)
	}

	var mirrorDirective, mirrorLocation, mirrorSplit string
	// split_clients counts in 0.01%: a share that rounds to 0 mirrors nothing.
	if bp := mirrorBasisPoints(p.Mirror); bp > 0 {
		mirrorDirective = "      mirror " + mirrorPath + ";\n"
		target := "      return 204;\n" // nothing to mirror to: the copy is dropped, as Envoy does
		if len(mirror) > 0 {
			ups = append(ups, upstream{name: "mirror", servers: servers(mirror, nil)})
			host := "$lab_shadow_host"
			if p.Mirror.KeepHost {
				host = "$http_host" // no "-shadow" (Istio 1.28 and later)
			}
			target = "      proxy_pass http://mirror$request_uri;\n" + proxyHeaders(host)
		}
		mirrorSplit = fmt.Sprintf("  split_clients \"${request_id}m\" $lab_mirror {\n    %s copy;\n    * \"\";\n  }\n", percent(bp))
		mirrorLocation = "    location = " + mirrorPath + " {\n      internal;\n      if ($lab_mirror = \"\") { return 204; }\n" + target + "    }\n"
	}

	var b strings.Builder
	fmt.Fprintf(&b, `# Rendered by mesh-verify's lab (generation %[2]d): a mesh entry's data plane.
%[3]sworker_processes 1;
# Old workers finish their requests after a reload, for this long at most.
worker_shutdown_timeout 2s;
daemon off;
pid "%[1]s/nginx.pid";
error_log "%[1]s/error.log" warn;
events { worker_connections 4096; }
http {
  client_body_temp_path "%[1]s/body";
  proxy_temp_path "%[1]s/proxy";
  fastcgi_temp_path "%[1]s/fastcgi";
  uwsgi_temp_path "%[1]s/uwsgi";
  scgi_temp_path "%[1]s/scgi";
  # One line per primary request: which upstream served which request id.
  log_format lab '$time_iso8601 $lab_request_id $upstream_addr $status';
  access_log "%[1]s/access.log" lab;
  # Envoy makes up an x-request-id when the client sent none.
  map $http_x_request_id $lab_request_id {
    "" $request_id;
    default $http_x_request_id;
  }
  # Envoy's shadow host: "-shadow" before the port.
  map $http_host $lab_shadow_host {
    "~^(?<h>[^:]+)(?<p>:[0-9]+)$" "${h}-shadow${p}";
    default "${http_host}-shadow";
  }
`, escape(c.Dir), c.Generation, userLine())
	for _, u := range ups {
		fmt.Fprintf(&b, "  upstream %s {\n", u.name)
		for _, s := range u.servers {
			fmt.Fprintf(&b, "    server %s;\n", s)
		}
		b.WriteString("    keepalive 32;\n  }\n")
	}
	b.WriteString(mirrorSplit)
	b.WriteString(split)
	fmt.Fprintf(&b, `  server {
    listen %s;
    keepalive_requests 100000;
    location = %s { default_type text/plain; return 200 "%d\n"; }
    location / {
%s%s%s    }
%s  }
}
`, c.Listen, GenerationPath, c.Generation, mirrorDirective, route, proxyHeaders("$http_host"), mirrorLocation)
	return b.String(), nil
}

// single routes everything to one upstream of pods (weight(b) each; nil
// means 1), or answers 503 when there is none.
func single(name string, pods []meshsim.Backend, weight func(meshsim.Backend) int) ([]upstream, string) {
	if len(pods) == 0 {
		return nil, "      return 503 \"" + meshsim.NoHealthyUpstream + "\";\n"
	}
	return []upstream{{name: name, servers: servers(pods, weight)}}, "      proxy_pass http://" + name + ";\n"
}

// weighted renders one upstream per weighted group with ready pods and a
// split_clients over the groups; a group without ready pods keeps its
// share and answers it 503, as Envoy does for a weighted cluster with no
// healthy endpoint (and as the simulator does).
func weighted(p meshsim.Policy, primary []meshsim.Backend) (ups []upstream, split, route string) {
	groups := make([]string, 0, len(p.Weights))
	var total float64
	for g, w := range p.Weights {
		if w > 0 {
			groups = append(groups, g)
			total += w
		}
	}
	sort.Strings(groups)
	var b strings.Builder
	b.WriteString("  split_clients \"${request_id}g\" $lab_group {\n")
	var cum float64
	var prev int64
	for i, g := range groups {
		var pods []meshsim.Backend
		for _, be := range primary {
			if meshsim.InGroup(be, p.WeightBy, g) {
				pods = append(pods, be)
			}
		}
		value := "none"
		if len(pods) > 0 {
			value = fmt.Sprintf("g%d", i)
			ups = append(ups, upstream{name: value, servers: servers(pods, nil)})
		}
		// Cumulative rounding to split_clients' 0.01% keeps the shares
		// summing to 100%; the last group takes the rest ("*").
		cum += p.Weights[g] / total
		if i == len(groups)-1 {
			fmt.Fprintf(&b, "    * %s;\n", value)
			break
		}
		bp := int64(math.Round(cum * 10000))
		if bp > prev {
			fmt.Fprintf(&b, "    %s %s;\n", percent(bp-prev), value)
		}
		prev = bp
	}
	b.WriteString("  }\n")
	route = "      if ($lab_group = none) { return 503 \"" + meshsim.NoHealthyUpstream + "\"; }\n      proxy_pass http://$lab_group;\n"
	return ups, b.String(), route
}

// mirrorBasisPoints is the mirrored share in 0.01%, 0 without a mirror.
func mirrorBasisPoints(m *meshsim.Mirror) int64 {
	if m == nil {
		return 0
	}
	return int64(math.Round(m.Percent * 100))
}

// escape makes s safe inside a double-quoted nginx string.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// userLine keeps nginx's workers as the lab's user when the lab runs as
// root: by default they would switch to nobody, who cannot write the temp
// directories inside a private lab directory (large bodies would fail).
func userLine() string {
	if os.Geteuid() == 0 {
		return "user root;\n"
	}
	return ""
}

// percent formats basis points as split_clients wants: "12.34%".
func percent(bp int64) string {
	return fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
}

func servers(pods []meshsim.Backend, weight func(meshsim.Backend) int) []string {
	out := make([]string, 0, len(pods))
	for _, b := range pods {
		w := 1
		if weight != nil {
			w = weight(b)
		}
		out = append(out, fmt.Sprintf("%s weight=%d max_fails=0", b.Addr, w))
	}
	return out
}

// proxyHeaders are the directives every proxied location shares: HTTP/1.1
// keep-alive to the upstream, the request id every hop logs, and the Host.
func proxyHeaders(host string) string {
	// No retry on another upstream and no passive health marking: a pod
	// that fails a request fails that request, as with the simulator (the
	// daemon removes gone pods from the configuration).
	return "      proxy_next_upstream off;\n" +
		"      proxy_http_version 1.1;\n" +
		"      proxy_set_header Connection \"\";\n" +
		"      proxy_set_header X-Request-Id $lab_request_id;\n" +
		"      proxy_set_header Host " + host + ";\n"
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }
