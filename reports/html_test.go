package reports_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// hostile builds the strings a target or a log could send, each aimed at a
// recorder on 127.0.0.1 so that anything the page ran or fetched is seen.
func hostile(rec string) (script, img string) {
	return fmt.Sprintf(`<script>fetch('%s/script')</script>`, rec),
		fmt.Sprintf(`"><img src=x onerror="fetch('%s/img')">`, rec)
}

// recorder counts every request made to it.
func recorder(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		t.Logf("the page made a request: %s %s", r.Method, r.URL)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), &hits
}

// hostileRun runs a real attack on a real server whose responses name pods
// with markup in them and answer some requests with a script only.
func hostileRun(t *testing.T, rec string) *reports.Report {
	t.Helper()
	script, img := hostile(rec)
	var n atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 5 {
		case 0:
			fmt.Fprintf(w, "oops %s", script) // no rule matches: a sample in the report
		case 1, 3:
			fmt.Fprintf(w, "pod=%s;cluster=c1;", img)
		default:
			fmt.Fprintf(w, "pod=%s;cluster=c2;", script)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	sc, err := scenarios.Parse("hostile.yaml", []byte(fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: hostile, description: "responses with markup"}
clusters: [{name: c1}, {name: c2}]
target: {url: "http://%s/ping"}
attack: {requests: 300, concurrency: 4}
attribution:
  rules: [{body: 'pod=(?P<pod>.*?);cluster=(?P<cluster>[^;]*);'}]
expect:
  - name: equal by cluster
    split: {by: cluster, model: equal}
  - name: both clusters reached
    reached: {by: cluster}
`, ln.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runner.Run(context.Background(), sc, runner.Options{Command: []string{"mesh-verify", "run", "hostile.yaml", "--token", "s3cr3t"}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return rep
}

// chromium is Debian's chromium, which .ci/run installs. Without it the
// browser tests cannot run; under CI (MESH_VERIFY_REQUIRE_CHROMIUM=1) that
// is a failure, not a skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MESH_VERIFY_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); .ci/run installs it")
	return ""
}

// headless runs chromium on a local file with the network cut off (every
// proxied request goes to a closed port; loopback, where the recorder is,
// is reached directly so an escaped payload would be seen) and returns
// what it printed.
func headless(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-default-apps", "--no-pings",
		"--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
		"--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

func TestHTMLReportRendersInChromiumAndRunsNothing(t *testing.T) {
	bin := chromium(t)
	rec, hits := recorder(t)
	rep := hostileRun(t, rec)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := reports.HTMLWith(f, rep, reports.HTMLOptions{Scenario: []byte("target: {url: 'http://h/?token=abc'}\n")}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dom, logs := headless(t, bin, "--dump-dom", "file://"+page)
	script, img := hostile(rec)
	for _, want := range []string{"<svg", "<polyline", `class="band"`, `class="passbar"`, "equal by cluster",
		domText(script), domText(`"><img src=x onerror=`)} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if strings.Contains(dom, "<script") || strings.Contains(dom, "<img") {
		t.Errorf("a payload became an element in the rendered page:\n%s", excerpt(dom, "<script", "<img"))
	}
	if strings.Contains(dom, "s3cr3t") || strings.Contains(dom, "abc'") {
		t.Errorf("a credential reached the page")
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "CONSOLE") {
			t.Errorf("console message: %s", l)
		}
	}
	if n := hits.Load(); n > 0 {
		t.Errorf("the page made %d requests (a payload ran or something was fetched)", n)
	}
	_ = img

	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, "--hide-scrollbars", "--window-size=1200,1600", "--screenshot="+shot, "file://"+page)
	pf, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer pf.Close()
	im, err := png.Decode(pf)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colours := map[uint32]bool{}
	b := im.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := im.At(x, y).RGBA()
			colours[r>>12<<8|g>>12<<4|bl>>12] = true
		}
	}
	if len(colours) < 8 {
		t.Errorf("the screenshot has %d colours: the page rendered blank", len(colours))
	}
}

// domText is text as a browser serialises a text node: only &, < and >
// escaped (the HTML serialisation algorithm).
func domText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func excerpt(s string, needles ...string) string {
	for _, n := range needles {
		if i := strings.Index(s, n); i >= 0 {
			return s[max(0, i-80):min(len(s), i+160)]
		}
	}
	return ""
}

// Every field that can carry text from a response, a log, a header or a
// cluster, set to markup: the HTML must contain no element and no event
// handler attribute that the template did not write. Checked with a real
// HTML tokenizer, not by searching strings.
func TestHTMLEscapesEveryField(t *testing.T) {
	script, img := hostile("http://127.0.0.1:9")
	evil := script + img
	r := &reports.Report{
		Schema: reports.Schema, RunID: evil, Target: evil,
		Scenario: reports.ScenarioInfo{Name: evil, File: evil, Description: evil},
		Command:  []string{"mesh-verify", evil},
		Tool:     reports.Tool{Name: "mesh-verify", Version: evil},
		Metrics: reports.Metrics{Requests: 10, StatusCodes: map[string]int{evil: 1},
			Errors: []reports.ErrorCount{{Message: evil, Count: 1}}},
		Dimensions: []reports.Dimension{{Name: "pod", Source: "body", Attributed: 1,
			Buckets: []reports.Bucket{{Name: evil, Cluster: evil, Count: 1, Share: 1, Sources: []string{evil}}}}},
		Samples:  []string{evil},
		Warnings: []string{evil},
		Timeline: reports.Timeline{SliceWidth: time.Second, Slices: []reports.Slice{
			{Requests: 1, Clusters: map[string]int64{evil: 1}, Sources: map[string]map[string]int64{"logs": {evil: 1}},
				Latency: map[string]reports.SliceLatency{evil: {N: 1, P50: time.Millisecond, P99: time.Millisecond}}},
			{Start: time.Second, Requests: 1, Clusters: map[string]int64{evil: 1}}}},
		ConfigErrors:   []reports.ConfigError{{Subject: evil, Message: evil, Samples: []string{evil}}},
		Rules:          []reports.RuleReport{{Source: "logs", Rule: evil, Read: 1, Samples: []string{evil}}},
		Reconciliation: []reports.Reconciliation{{Source: evil, Status: evil, Reason: evil, Pods: []reports.PodReconciliation{{Cluster: evil, Pod: evil, Workload: evil, Mode: evil}}}},
		Kubernetes: &reports.Kubernetes{Clusters: []reports.KubeCluster{{Name: evil, Context: evil, Server: evil}},
			Inventory: map[string]any{"clusters": []any{map[string]any{"pods": []any{map[string]any{"cluster": evil, "name": evil, "version": evil, "ip": evil, "node": evil}}}}},
			Tunnel:    map[string]any{"target": evil},
			Logs:      []reports.LogStream{{Target: evil, LastError: evil}}},
		Expectation: []reports.Expectation{{Name: evil, Kind: evil, By: evil, Source: evil, Reason: evil}},
	}
	var b bytes.Buffer
	if err := reports.HTMLWith(&b, r, reports.HTMLOptions{Scenario: []byte(evil)}); err != nil {
		t.Fatal(err)
	}
	z := html.NewTokenizer(bytes.NewReader(b.Bytes()))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "img", "iframe", "object", "embed", "link", "base", "form":
			t.Errorf("element <%s> in the report: %s", tok.Data, tok.String())
		}
		for _, a := range tok.Attr {
			if strings.HasPrefix(a.Key, "on") || (a.Key == "src") || (a.Key == "href" && !strings.HasPrefix(a.Val, "#")) {
				t.Errorf("attribute %s=%q on <%s>: the page must load and run nothing", a.Key, a.Val, tok.Data)
			}
		}
	}
	if !strings.Contains(b.String(), html.EscapeString(script)) {
		t.Errorf("the payload is not shown as text")
	}
}
