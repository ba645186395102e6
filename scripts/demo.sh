#!/usr/bin/env bash
# make demo: three "clusters" (one backend each, answering like the
# tutorials' callme-service) behind nginx weighted 2:1:1, then mesh-verify
# judges a correct and a wrong expectation. Until the kwok lab lands, the
# data plane is nginx; everything listens on 127.0.0.1 and is stopped by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "demo: needs nginx (apt-get install nginx-light)" >&2; exit 3; }
DIR=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cat > "$DIR/pod.py" <<'PY'
import sys, http.server
port, cluster, ver = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        b = f"I'm callme-service {ver} (pod callme-{cluster}-0 in {cluster})".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY

upstream=""
for spec in c1:v1:2 c2:v2:1 c3:v2:1; do
  IFS=: read -r cluster ver weight <<<"$spec"
  port=$(freeport)
  python3 "$DIR/pod.py" "$port" "$cluster" "$ver" &
  pids+=($!)
  upstream+="server 127.0.0.1:$port weight=$weight; "
done
port=$(freeport)
cat > "$DIR/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $DIR/nginx.pid; error_log $DIR/error.log warn;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $DIR/b; proxy_temp_path $DIR/p;
  fastcgi_temp_path $DIR/f; uwsgi_temp_path $DIR/u; scgi_temp_path $DIR/s;
  upstream mesh { $upstream keepalive 16; }
  server { listen 127.0.0.1:$port;
    location / { proxy_pass http://mesh; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
"$NGINX" -p "$DIR" -c "$DIR/nginx.conf" &
pids+=($!)
sleep 1

scenario() {
  cat > "$DIR/$1.yaml" <<YAML
apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: $1, description: "nginx weighted 2:1:1 over c1, c2, c3"}
clusters: [{name: c1}, {name: c2}, {name: c3}]
target: {url: "http://127.0.0.1:$port/callme/ping"}
attack: {rate: 200/s, duration: 10s}
attribution:
  preset: tutorial
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
expect:
$2
YAML
}
scenario weighted-2-1-1 "  - split: {by: cluster, weights: {c1: 2, c2: 1, c3: 1}}
  - successRate: {atLeast: 99%}"
scenario expects-equal "  - split: {by: cluster, model: equal}"
for s in weighted-2-1-1 expects-equal; do
  echo
  echo "### mesh-verify run $s.yaml"
  code=0
  bin/mesh-verify run "$DIR/$s.yaml" || code=$?
  echo "(exit code $code)"
done
