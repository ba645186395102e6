#!/usr/bin/env python3
"""mesh-verify side by side with vegeta, hey, siege and wrk; writes BENCHMARKS.md.

Run by bench/run.sh (`make bench`), which installs the peer tools, builds
mesh-verify and the vegeta CLI first. Every figure comes from one run on this
machine; the ratios compare tools measured in the same run, interleaved, so a
busy machine slows all of them alike rather than one of them. Everything
listens on and sends to 127.0.0.1; every process started here is stopped by
its pid; every load loop is bounded by a duration, a request count and an
outer timeout. Durations come from the environment (README.md, "Benchmarks").
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(ROOT)


def env(name, default, quick):
    v = os.environ.get(name)
    if v:
        return v
    return quick if QUICK else default


QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
OUT = os.path.abspath(os.environ.get("BENCH_OUT", "bench/out"))
REPORT = os.path.abspath(os.environ.get("BENCH_REPORT", "BENCHMARKS.md"))
DUR = int(env("BENCH_DURATION", "8", "2"))                    # seconds per max-throughput run
ROUNDS = int(env("BENCH_ROUNDS", "3", "1"))
CONNS = [int(c) for c in env("BENCH_CONNECTIONS", "32 128", "32 128").split()]
RATES = [int(r) for r in env("BENCH_RATES", "1000 5000 10000 20000", "1000 20000").split()]
RATE_DUR = int(env("BENCH_RATE_DURATION", "10", "2"))
MEM_REQUESTS = int(env("BENCH_MEM_REQUESTS", "1000000", "100000"))
MEM_DURATION = int(env("BENCH_MEM_DURATION", "60", "30"))     # bound of each memory run, whichever comes first
PODS = int(env("BENCH_PODS", "10000", "10000"))
TUNNEL_DUR = int(env("BENCH_TUNNEL_DURATION", "30", "5"))    # the sustained run: zero errors for this long
TUNNEL_PROBE = int(env("BENCH_TUNNEL_PROBE", "5", "2"))
TUNNEL_ROUNDS = int(env("BENCH_TUNNEL_ROUNDS", "3", "1"))  # probes of each forwarder, alternating; the median stands
TUNNEL_CONNS = int(env("BENCH_TUNNEL_CONNECTIONS", "32", "32"))
LOG_LINES = int(env("BENCH_LOG_LINES", "1000000", "200000"))
RUN_TIMEOUT = int(env("BENCH_RUN_TIMEOUT", "420", "120"))     # outer bound of any one process
NOTE = os.environ.get("BENCH_NOTE", "")
BIN = os.path.abspath("bin/mesh-verify")
VEGETA = os.path.join(OUT, "vegeta")
LAB_BIN = os.environ.get("MESH_VERIFY_LAB_BIN", "")
NPROC = os.cpu_count() or 1

started = []  # Popen objects still to stop


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


class Run:
    """One finished child: exit code, CPU seconds and peak RSS from its rusage,
    and the split of its resident memory sampled while it ran."""

    def __init__(self, cmd, code, ru, wall, out, err):
        self.cmd, self.code, self.wall = cmd, code, wall
        self.cpu = ru.ru_utime + ru.ru_stime
        self.maxrss_mb = ru.ru_maxrss / 1024  # Linux reports KiB
        self.anon_mb, self.file_mb = ru.anon_mb, ru.file_mb
        self.out, self.err = out, err


class Rusage:
    """wait4's rusage plus the peak of the sampled memory split."""

    def __init__(self, ru, anon_mb, file_mb):
        self.ru_utime, self.ru_stime, self.ru_maxrss = ru.ru_utime, ru.ru_stime, ru.ru_maxrss
        self.anon_mb, self.file_mb = anon_mb, file_mb


MEM_SAMPLE = 0.02  # seconds between two reads of /proc/PID/status


def sample_memory(pid, stop_ev, peak):
    """Reads RssAnon (private: heap, stacks) and RssFile (pages of the
    executable and libraries mapped from their files: shared, clean, the
    kernel can drop them) every MEM_SAMPLE s; keeps the highest RssAnon and
    the highest RssFile. ru_maxrss is their sum's high-water mark."""
    path = f"/proc/{pid}/status"
    while not stop_ev.is_set():
        try:
            with open(path) as f:
                txt = f.read()
        except OSError:
            return
        a = re.search(r"^RssAnon:\s+(\d+) kB", txt, re.M)
        fl = re.search(r"^RssFile:\s+(\d+) kB", txt, re.M)
        if a and fl:
            peak[0] = max(peak[0], int(a.group(1)) / 1024)
            peak[1] = max(peak[1], int(fl.group(1)) / 1024)
        stop_ev.wait(MEM_SAMPLE)


def reap(p, timeout):
    """Waits for p with wait4 (its own rusage, not its siblings'), killing it
    by pid after timeout seconds; samples its memory split meanwhile."""
    timer = threading.Timer(timeout, lambda: p.poll() is None and p.kill())
    timer.start()
    stop_ev, peak = threading.Event(), [0.0, 0.0]
    sampler = threading.Thread(target=sample_memory, args=(p.pid, stop_ev, peak), daemon=True)
    sampler.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
        stop_ev.set()
        sampler.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p in started:
        started.remove(p)
    return p.returncode, Rusage(ru, peak[0], peak[1])


def run(cmd, timeout=None, stdin=None, env_extra=None):
    """Runs cmd to completion; stdout and stderr go to files under OUT."""
    timeout = timeout or RUN_TIMEOUT
    e = dict(os.environ, **(env_extra or {}))
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as er:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=o, stderr=er, stdin=stdin or subprocess.DEVNULL, env=e)
        started.append(p)
        code, ru = reap(p, timeout)
        wall = time.time() - t0
        o.seek(0)
        er.seek(0)
        return Run(cmd, code, ru, wall, o.read().decode(errors="replace"), er.read().decode(errors="replace"))


def start(cmd, stdout, env_extra=None):
    e = dict(os.environ, **(env_extra or {}))
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=e)
    started.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in started:
        started.remove(p)


def cleanup():
    for p in list(started):
        try:
            stop(p)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


# ---------------------------------------------------------------- targets

def nginx_conf(d, port, pods_port, pods):
    # One worker, as in the reference measurement the targets come from: the target's CPU
    # is a fixed share of the 2 cores for every tool. The second server
    # names one of `pods` pods per request (split_clients over the request
    # id), for the memory of a run with that many distinct pods.
    # split_clients takes percentages to two decimals: 10,000 buckets at most.
    if not 2 <= pods <= 10000:
        raise ValueError(f"BENCH_PODS={pods}: want 2 to 10000")
    step = (10000 // pods) / 100
    buckets = "\n".join(f"    {step:.2f}% p{i};" for i in range(pods - 1)) + f"\n    * p{pods - 1};"
    return f"""worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  split_clients "${{request_id}}" $pod {{
{buckets}
  }}
  server {{
    listen 127.0.0.1:{port};
    keepalive_requests 10000000;
    location / {{ return 200 "I'm callme-service v1 (pod callme-c1-0 in c1)\\n"; }}
  }}
  server {{
    listen 127.0.0.1:{pods_port};
    keepalive_requests 10000000;
    location / {{ return 200 "I'm callme-service v1 (pod callme-$pod in c1)\\n"; }}
  }}
}}
"""


def scenario(path, url, attack):
    with open(path, "w") as f:
        f.write(f"""apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {{name: bench}}
clusters: [{{name: c1}}]
target: {{url: "{url}"}}
attack:
{attack}
attribution:
  preset: tutorial
  rules: [{{body: 'pod (?P<pod>\\S+) in (?P<cluster>c\\d)'}}]
expect:
  - reached: {{buckets: [c1]}}
""")


# ---------------------------------------------------------------- tools

class Result:
    def __init__(self, tool, requests, rate, errors, run, p50=None, p99=None, extra=None):
        self.tool, self.requests, self.rate, self.errors, self.run = tool, requests, rate, errors, run
        self.p50, self.p99 = p50, p99  # seconds
        self.extra = extra or {}

    @property
    def cpu_per_100k(self):
        return self.run.cpu / self.requests * 1e5 if self.requests else None


def need(ok, what, r):
    if not ok:
        raise RuntimeError(f"{what}: exit {r.code}\n  cmd: {' '.join(r.cmd)}\n  stdout: {r.out[-800:]}\n  stderr: {r.err[-800:]}")


def mesh_verify(name, attack, url, tag):
    d = os.path.join(OUT, "runs", tag)
    shutil.rmtree(d, ignore_errors=True)
    sc = os.path.join(OUT, f"{tag}.yaml")
    scenario(sc, url, attack)
    r = run([BIN, "run", sc, "--quiet", "--out", d])
    reports = glob.glob(f"{d}/*/report.json")
    need(reports and r.code in (0, 1, 2), f"mesh-verify run {sc}", r)
    m = json.load(open(reports[0]))
    met = m["metrics"]
    return Result(name, met["requests"], m["attack"]["achievedRate"], met["requests"] - met["successes"], r,
                  met["latency"]["p50"] / 1e9, met["latency"]["p99"] / 1e9,
                  {"warnings": m.get("warnings") or [], "report": m})


def vegeta(name, url, args, targets=None, lazy=False):
    """vegeta attack | vegeta report -type=json; CPU is the pipeline's (both
    processes), RSS the attack's."""
    tfile = targets or os.path.join(OUT, "targets.txt")
    if not targets:
        with open(tfile, "w") as f:
            f.write(f"GET {url}\n")
    cmd = [VEGETA, "attack", f"-targets={tfile}"] + (["-lazy"] if lazy else []) + args
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as er:
        t0 = time.time()
        a = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=er, stdin=subprocess.DEVNULL)
        started.append(a)
        rp = subprocess.Popen([VEGETA, "report", "-type=json"], stdin=a.stdout, stdout=o, stderr=er)
        started.append(rp)
        a.stdout.close()
        code, ru = reap(a, RUN_TIMEOUT)
        rcode, rru = reap(rp, 60)
        wall = time.time() - t0
        o.seek(0)
        er.seek(0)
        out, err = o.read().decode(), er.read().decode(errors="replace")
    r = Run(cmd, code, ru, wall, out, err)
    r.cpu += rru.ru_utime + rru.ru_stime
    need(code == 0 and rcode == 0, "vegeta", r)
    v = json.loads(out)
    errs = v["requests"] - round(v["success"] * v["requests"])
    return Result(name, v["requests"], v["rate"], errs, r, v["latencies"]["50th"] / 1e9, v["latencies"]["99th"] / 1e9,
                  {"throughput": v["throughput"], "errors": v.get("errors") or [], "codes": v.get("status_codes") or {}})


def hey(url, conns, dur):
    r = run(["hey", "-z", f"{dur}s", "-c", str(conns), url], timeout=dur + 60)
    m = re.search(r"Requests/sec:\s+([\d.]+)", r.out)
    need(r.code == 0 and m, "hey", r)
    ok = sum(int(n) for n in re.findall(r"\[200\]\s+(\d+) responses", r.out))
    allr = sum(int(n) for n in re.findall(r"\[\d+\]\s+(\d+) responses", r.out))
    errs = sum(int(n) for n in re.findall(r"\[\d+\]\s+(\d+)\s+errors?", r.out)) if "Error distribution" in r.out else 0
    return Result("hey", allr + errs, float(m.group(1)), allr - ok + errs, r)


def siege(url, conns, dur):
    rc = os.path.join(OUT, "siegerc")
    with open(rc, "w") as f:  # keep-alive like the others; no log file, no ~/.siege use
        # timeout: a socket read that never ends would hold siege past -t.
        f.write("connection = keep-alive\nlogging = false\nshow-logfile = false\nprotocol = HTTP/1.1\nparser = false\ntimeout = 5\n")
    r = run(["siege", "-R", rc, "-b", "-c", str(conns), "-t", f"{dur}S", url], timeout=dur + 30)
    txt = r.out + r.err
    rate = re.search(r"Transaction rate:\s+([\d.]+)", txt)
    hits = re.search(r"Transactions:\s+(\d+)", txt)
    failed = re.search(r"Failed transactions:\s+(\d+)", txt)
    need(rate and hits, "siege", r)
    return Result("siege", int(hits.group(1)), float(rate.group(1)), int(failed.group(1)) if failed else 0, r)


def wrk(url, conns, dur):
    r = run(["wrk", f"-t{min(NPROC, conns)}", f"-c{conns}", f"-d{dur}s", "--latency", url], timeout=dur + 60)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", r.out)
    n = re.search(r"(\d+) requests in", r.out)
    need(r.code == 0 and rate and n, "wrk", r)
    errs = 0
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", r.out)
    if m:
        errs += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", r.out)
    if m:
        errs += sum(int(x) for x in m.groups())
    return Result("wrk", int(n.group(1)), float(rate.group(1)), errs, r)


def versions():
    def first(cmd):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
            return (p.stdout + p.stderr).strip().splitlines()[0]
        except Exception as e:  # noqa: BLE001 - a missing version is shown as such
            return f"? ({e})"

    def deb(pkg):
        return first(["dpkg-query", "-W", "-f=${Version}", pkg])
    return {
        "mesh-verify": first([BIN, "version"]),
        "vegeta CLI": "github.com/tsenart/vegeta/v12 " + first(["go", "list", "-m", "-f", "{{.Version}}", "github.com/tsenart/vegeta/v12"]),
        "hey": "Debian hey " + deb("hey"),
        "siege": first(["siege", "--version"]),
        "wrk": first(["wrk", "--version"]).split(" Copyright")[0],
        "nginx": first(["nginx", "-v"]),
        "go": first(["go", "version"]),
        "kubectl": first([os.path.join(LAB_BIN, "kubectl"), "version", "--client"]) if LAB_BIN else "-",
        "grep": first(["grep", "--version"]),
    }


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- sections

def throughput(url):
    tools = ["mesh-verify open loop", "mesh-verify closed loop", "vegeta", "hey", "siege", "wrk"]
    res = {(c, t): [] for c in CONNS for t in tools}
    failed = []
    cap = 2_000_000 * max(1, DUR // 8 + 1)

    def one(t, c, rnd):
        if t == "mesh-verify open loop":
            # The rate is far above what any tool reaches: the pacer asks
            # for more than the capped workers can send.
            return mesh_verify(t, f"  rate: 1000000/s\n  concurrency: {c}\n  duration: {DUR}s\n  requests: {cap}", url, f"max-open-{c}-{rnd}")
        if t == "mesh-verify closed loop":
            return mesh_verify(t, f"  concurrency: {c}\n  duration: {DUR}s\n  requests: {cap}", url, f"max-closed-{c}-{rnd}")
        if t == "vegeta":
            return vegeta(t, url, ["-rate=0", f"-workers={c}", f"-max-workers={c}", f"-duration={DUR}s"])
        if t == "hey":
            return hey(url, c, DUR)
        if t == "siege":
            return siege(url, c, DUR)
        return wrk(url, c, DUR)

    for rnd in range(ROUNDS):
        order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
        for c in CONNS:
            for t in order:
                log(f"  round {rnd + 1}/{ROUNDS}, {c} connections: {t}")
                try:
                    r = one(t, c, rnd)
                except RuntimeError as e:
                    # One failed run (siege now and then hangs at the end
                    # of its run) costs that tool a round, not the section.
                    failed.append(f"{t}, {c} connections, round {rnd + 1}: {str(e).splitlines()[0]}")
                    log(f"    failed: {e}")
                    continue
                res[(c, t)].append(r)
    return tools, res, failed


def rates(url):
    rows = []
    for i, rate in enumerate(RATES):
        pair = {}
        order = ["mesh-verify", "vegeta"] if i % 2 == 0 else ["vegeta", "mesh-verify"]
        for t in order:
            log(f"  {rate}/s for {RATE_DUR}s: {t}")
            if t == "mesh-verify":
                pair[t] = mesh_verify(t, f"  rate: {rate}/s\n  duration: {RATE_DUR}s", url, f"rate-{rate}")
            else:
                pair[t] = vegeta(t, url, [f"-rate={rate}", f"-duration={RATE_DUR}s"])
        rows.append((rate, pair))
    return rows


def memory(url, pods_url):
    # Closed loop, 32 connections, exactly MEM_REQUESTS requests each: the
    # vegeta CLI has no request count, so it reads one target per request
    # from a file of MEM_REQUESTS lines (-lazy) and stops at its end.
    tfile = os.path.join(OUT, "targets-mem.txt")
    with open(tfile, "w") as f:
        line = f"GET {url}\n"
        for _ in range(MEM_REQUESTS // 10000):
            f.write(line * 10000)
        f.write(line * (MEM_REQUESTS % 10000))
    bound = f"  concurrency: 32\n  requests: {MEM_REQUESTS}\n  duration: {MEM_DURATION}s"
    out = {}
    log(f"  mesh-verify, {MEM_REQUESTS} requests")
    out["mesh-verify"] = mesh_verify("mesh-verify", bound, url, "mem")
    log(f"  vegeta, {MEM_REQUESTS} requests")
    v = vegeta("vegeta", url, ["-rate=0", "-workers=32", "-max-workers=32", f"-duration={MEM_DURATION}s"],
               targets=tfile, lazy=True)
    if v.extra["errors"] == ["no targets to attack"]:
        # Each worker that finds the lazy targets used up records one more
        # result, an error without a status: not a request.
        n = v.extra["codes"].get("0", 0)
        v.requests -= n
        v.errors -= n
    out["vegeta"] = v
    log(f"  mesh-verify, {MEM_REQUESTS} requests naming {PODS} distinct pods")
    out["mesh-verify, 10k pods"] = mesh_verify("mesh-verify", bound, pods_url, "mem-pods")
    os.remove(tfile)
    # What each process holds before its first request: the executable's
    # pages its start-up touched (package initialisation) and the
    # runtime's first heap, against the executable's size.
    startup = {}
    for name, cmd in (("mesh-verify", [BIN, "version"]), ("vegeta", [VEGETA, "-version"])):
        r = run(cmd, timeout=60)
        need(r.code == 0, " ".join(cmd), r)
        startup[name] = {"maxrss_mb": r.maxrss_mb, "binary_mb": os.path.getsize(cmd[0]) / 1e6, "cmd": " ".join(os.path.basename(c) for c in cmd)}
    return {"runs": out, "startup": startup}


def forward_addr(logfile, p, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        m = re.search(r"Forwarding from (127\.0\.0\.1:\d+) ->", open(logfile).read())
        if m:
            return m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"{' '.join(p.args)}: no Forwarding line (log {logfile}): {open(logfile).read()[-800:]}")


def proc_cpu(pids):
    """User + system CPU seconds of each pid so far, from /proc/PID/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return out


def lab_processes(labdir):
    """The lab's processes (kwokctl's components run from inside the lab
    directory, the daemon names it): pid -> short name."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and any(labdir in a for a in argv):
            name = os.path.basename(argv[0])
            out[int(d)] = "lab daemon (app, kwok objects)" if "serve" in argv else name
    return out


def tunnel():
    """mesh-verify port-forward vs kubectl port-forward to the same lab pod,
    both forwarding at once: short closed-loop probes, TUNNEL_ROUNDS of
    each and alternating, find each one's ceiling and CPU (the median
    round stands), then open-loop runs of TUNNEL_DUR seconds step down from
    90% of the ceiling until one has zero errors and holds its rate; that
    rate is the max sustained rate."""
    if not LAB_BIN or not os.path.exists(os.path.join(LAB_BIN, "kubectl")):
        raise RuntimeError("MESH_VERIFY_LAB_BIN is not set to the lab binaries (tools/lab/build.sh)")
    labdir = os.path.join(OUT, "lab")
    kcfg = os.path.join(labdir, "kubeconfig")
    log("  lab up (one cluster, one callme pod)")
    up = run([BIN, "lab", "up", "--topology", "bench/tunnel-topology.yaml", "--dir", labdir], timeout=240)
    try:
        need(up.code == 0, "mesh-verify lab up", up)
        kubectl = os.path.join(LAB_BIN, "kubectl")
        pods = run([kubectl, "--kubeconfig", kcfg, "--context", "kind-c1", "-n", "default", "get", "pods", "-o", "name"], timeout=60)
        pod = next((p for p in pods.out.split() if p.startswith("pod/callme-service-")), None)
        need(pods.code == 0 and pod, "kubectl get pods", pods)
        fwd = {
            "mesh-verify port-forward": [BIN, "port-forward", "--kubeconfig", kcfg, "--context", "kind-c1", "-n", "default", pod, ":8080"],
            "kubectl port-forward": [kubectl, "--kubeconfig", kcfg, "--context", "kind-c1", "-n", "default", "port-forward",
                                     "--address", "127.0.0.1", pod, ":8080"],
        }
        procs, addr = {}, {}
        try:
            for name, cmd in fwd.items():
                lf = os.path.join(OUT, f"forward-{name.split()[0]}.log")
                with open(lf, "w") as f:
                    procs[name] = start(cmd, f)
                addr[name] = f"http://{forward_addr(lf, procs[name])}/callme/ping"
            # The probes, TUNNEL_ROUNDS of each, alternate between the
            # forwarders (the order rotated each round), so that a burst
            # of other work on the machine falls on both; each round
            # charges every process a forwarded request crosses its CPU
            # over the probe: where the tunnel's ceiling comes from.
            rounds = {name: [] for name in fwd}
            # The lab's processes, not the forwarders (their command lines
            # name the lab too): each probe charges only the one it uses.
            lab = {pid: n for pid, n in lab_processes(labdir).items() if pid not in {p.pid for p in procs.values()}}
            for r in range(TUNNEL_ROUNDS):
                names = list(fwd)
                names = names[r % len(names):] + names[:r % len(names)]
                for name in names:
                    log(f"  {name}: probe {TUNNEL_PROBE}s (round {r + 1} of {TUNNEL_ROUNDS})")
                    watched = dict(lab)
                    watched[procs[name].pid] = name.split()[0]
                    cpu0 = proc_cpu(watched)
                    probe = vegeta(name, addr[name], ["-rate=0", f"-workers={TUNNEL_CONNS}", f"-max-workers={TUNNEL_CONNS}",
                                                      f"-duration={TUNNEL_PROBE}s"])
                    cpu1 = proc_cpu(watched)
                    chain = {}
                    for pid, pname in watched.items():
                        if pid in cpu0 and pid in cpu1:
                            chain[pname] = chain.get(pname, 0) + cpu1[pid] - cpu0[pid]
                    chain["vegeta (client)"] = probe.run.cpu
                    # The forwarder's own CPU, ms per 1,000 requests.
                    own = chain.get(name.split()[0], 0) / max(probe.requests, 1) * 1e6
                    rounds[name].append((own, probe, chain))
            res = {}
            for name in fwd:
                # The round whose forwarder CPU per request is the median
                # stands for the forwarder: its probe rate and its chain.
                _, probe, chain = sorted(rounds[name], key=lambda r: r[0])[len(rounds[name]) // 2]
                tries = []
                for frac in (0.9, 0.7, 0.5, 0.3):
                    want = max(50, int(probe.rate * frac / 50) * 50)
                    log(f"  {name}: {want}/s for {TUNNEL_DUR}s")
                    r = vegeta(name, addr[name], [f"-rate={want}", f"-duration={TUNNEL_DUR}s", f"-max-workers={TUNNEL_CONNS * 2}"])
                    held = r.errors == 0 and r.extra["throughput"] >= 0.98 * want
                    tries.append((want, r, held))
                    if held or len(tries) >= 3:
                        break
                res[name] = {"probe": probe, "tries": tries, "pod": pod, "chain": chain,
                             "rounds": [own for own, _, _ in rounds[name]]}
        finally:
            for p in procs.values():
                stop(p)
        return res
    finally:
        down = run([BIN, "lab", "down", "--dir", labdir], timeout=120)
        if down.code != 0:
            log(f"lab down --dir {labdir} failed: {down.err[-400:]}")


PEAK_RSS_GOAL = 1.5     # peak RSS, × vegeta's (issue 14)
ANON_GOAL = 1.2         # private memory (RssAnon), × vegeta's (issue 27 goal 1)
DEMO_WARM_GOAL = 180    # issue 27 goal 6: warm make demo, seconds
DEMO_COLD_GOAL = 600    # cold make demo (fresh clone, nothing built), seconds


def demo():
    """`make demo` as a user runs it a second time: the lab's Kubernetes
    binaries are cached (bench/run.sh made sure of it), every seed
    experiment in the lab, judged. Wall time, and the rows whose verdict
    differs from the tutorial's."""
    out = os.path.join(OUT, "demo")
    # The demo's own estimate file is kept (it changes no work), its
    # reports are not.
    for d in glob.glob(os.path.join(out, "*")):
        if os.path.isdir(d):
            shutil.rmtree(d, ignore_errors=True)
    log("  make demo (warm: lab binaries cached)")
    r = run(["bash", "scripts/demo.sh"], timeout=1800, env_extra={"MESH_VERIFY_DEMO_OUT": out})
    rows = [ln for ln in r.out.splitlines() if re.match(r"^\S+\s+(PASS|FAIL)\s", ln)]
    differs = [ln.split()[0] for ln in rows if "<-- differs" in ln]
    need(rows, "make demo (scripts/demo.sh): no summary table", r)
    return {"wall": r.wall, "code": r.code, "rows": len(rows), "differs": differs,
            "subset": os.environ.get("MESH_VERIFY_DEMO_ONLY", "").strip()}


def demo_cold():
    """What a first `make demo` builds before it runs anything, from an
    empty Go build cache into an empty lab binary directory: the lab's
    Kubernetes binaries (tools/lab/build.sh) and mesh-verify (make build).
    Modules come from the module cache as it is (a fresh machine downloads
    them too, about 0.9 GB, which this does not count). Not in the default
    sections: it costs 5 to 12 minutes of every core."""
    tmp = tempfile.mkdtemp(prefix="mesh-verify-bench-cold-")
    try:
        env = {"GOCACHE": os.path.join(tmp, "gocache"), "MESH_VERIFY_LAB_BIN": os.path.join(tmp, "labbin"),
               "MESH_VERIFY_LAB_QUIET": "1"}
        log("  tools/lab/build.sh from an empty Go build cache")
        lab = run(["bash", "tools/lab/build.sh"], timeout=3600, env_extra=env)
        need(lab.code == 0, "tools/lab/build.sh (cold)", lab)
        log("  make build from an empty Go build cache")
        mv = run(["make", "-s", "build", f"BIN={os.path.join(tmp, 'bin')}"], timeout=1800, env_extra=env)
        need(mv.code == 0, "make build (cold)", mv)
        return {"lab": lab.wall, "build": mv.wall}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ingestion():
    """podlogs' parsing of one big Istio access log (podlogs/ingest_bench_test.go),
    on one core, vs grep -c counting the same lines."""
    path = os.path.join(OUT, "ingest.log")
    run_id = "20260101T000000Z-bench"
    with open(path, "w") as f:
        chunk = []
        for i in range(LOG_LINES):
            ts = f"2026-01-02T03:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}000000Z"
            kind = "inbound|8080||" if i % 2 == 0 else "outbound|8080||callme-service.default.svc.cluster.local"
            chunk.append(f'{ts} [2026-01-02T03:04:05.{i % 1000:03d}Z] "GET /callme/ping HTTP/1.1" 200 - via_upstream - "-" 0 46 1 1 "-" "vegeta" '
                         f'"{run_id}-{i}" "callme-service:8080" "10.244.0.15:8080" {kind} 127.0.0.6:51234 10.244.0.15:8080 10.244.0.12:40112 - default\n')
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk = []
        f.write("".join(chunk))
    want = (LOG_LINES + 1) // 2
    log(f"  podlogs benchmark, {LOG_LINES} lines")
    b = run(["go", "test", "./podlogs/", "-run", "^$", "-bench", "^BenchmarkIngestFile$", "-benchtime", "1x", "-cpu", "1", "-count", "1"],
            timeout=600, env_extra={"BENCH_INGEST_FILE": path, "BENCH_INGEST_RUN_ID": run_id, "BENCH_INGEST_WANT": str(want)})
    m = re.search(r"([\d.e+]+) matched-lines/s", b.out)
    mc = re.search(r"([\d.e+]+) matched-lines/cpu-s", b.out)
    need(b.code == 0 and m and mc, "go test -bench IngestFile ./podlogs", b)
    grep, grep_cpu = [], []
    for _ in range(3):
        g = run(["grep", "-c", "-F", "inbound|", path], env_extra={"LC_ALL": "C"})
        need(g.code == 0 and int(g.out.strip()) == want, f"grep -c (want {want})", g)
        grep.append(want / g.wall)
        grep_cpu.append(want / max(g.cpu, 1e-3))
    size = os.path.getsize(path)
    os.remove(path)
    return {"mesh-verify": float(m.group(1)), "mesh-verify cpu": float(mc.group(1)), "grep": med(grep), "grep cpu": med(grep_cpu),
            "lines": LOG_LINES, "matched": want, "bytes": size,
            "bench": [ln for ln in b.out.splitlines() if ln.startswith("BenchmarkIngestFile")]}


def gobench():
    """The Go benchmarks with goals of their own: rendering every report
    format of a 1,000,000-request run (< 2 s, report.html < 3 MB) and the
    cost of recording every result (runlog Throughput, ratio >= 0.95)."""
    lines = []
    for pkg, args in (("./reports/", ["-run", "TestHTMLOfTheLargestRunStaysSmall", "-bench", "RenderAll1M", "-benchtime", "2x", "-v"]),
                      ("./runlog/", ["-run", "^$", "-bench", "Throughput", "-benchtime", "2x"])):
        log(f"  go test {pkg} {' '.join(args)}")
        r = run(["go", "test", pkg, "-count", "1"] + args, timeout=600)
        need(r.code == 0, f"go test {pkg}", r)
        lines += [f"go test {pkg} {' '.join(args)}"] + ["  " + ln.strip() for ln in r.out.splitlines()
                                                        if re.match(r"Benchmark\S+\s+\d+\s", ln) or "report.html:" in ln]
    return lines


PROFILE_GROUPS = [
    # (share of the client's CPU, what runs there), first match wins; the
    # patterns read pprof's function names.
    ("system calls (socket read/write, epoll)", r"^(syscall\.|internal/runtime/syscall|internal/poll\.|runtime\.(netpoll|epoll))"),
    ("allocation and garbage collection", r"^runtime\.(mallocgc|newobject|makeslice|growslice|memclr|memmove|.*[gG][cC]|.*[mM]ark|scan|.*[sS]weep|heap|mcache|mcentral|mspan|greyobject|findObject|wbBuf|bulkBarrier|typePointers|nextFreeFast|.*Alloc|deductAssistCredit)"),
    ("goroutine scheduling, channels, timers (runtime)", r"^runtime\."),
    ("fasthttp (the attack's request writer and response parser)", r"^github\.com/valyala/(fasthttp|bytebufferpool)"),
    ("Go's net, bufio, io and net/http (hey and vegeta run net/http's client)", r"^(net/http|net/textproto|net/url|bufio|net\.|mime|io\.|golang\.org/x/net)"),
    ("maps, hashing, strings, formatting (every package)", r"^(internal/runtime/maps|aeshash|memhash|indexbyte|bytes\.|strings\.|strconv\.|internal/strconv|internal/bytealg|unicode|fmt\.|sort\.|slices\.)"),
    ("vegeta (pacing, hit, results)", r"^github\.com/tsenart/vegeta"),
    ("context, locks, time (per request)", r"^(context|sync|time|internal/sync)\."),
    ("mesh-verify attack (engine, ids, connection pools, deadline)", r"^github\.com/mesh-verify/mesh-verify/attack"),
    ("mesh-verify attribution (rules' regexps)", r"^(regexp|github\.com/mesh-verify/mesh-verify/attribution)"),
    ("mesh-verify recording (results.bin, attribution.jsonl)", r"^(encoding/|github\.com/mesh-verify/mesh-verify/runlog)"),
    ("mesh-verify tally and sink", r"^github\.com/mesh-verify/mesh-verify/"),
]


ALLOC_GROUPS = [
    # (where an allocation is made, the allocating function's name), first
    # match wins. pprof charges an allocation to the function that asked for
    # it (after inlining): reflect's come from gob, through vegeta's results
    # encoder that writes results.bin.
    ("Go's net, bufio, io and net/http (hey and vegeta run net/http's client)", r"^(net/http|net/textproto|net/url|bufio|net\.|mime|io\.|golang\.org/x/net)"),
    ("fasthttp (the attack's request writer and response parser)", r"^github\.com/valyala/(fasthttp|bytebufferpool)"),
    ("mesh-verify recording (results.bin through vegeta's gob encoder, attribution.jsonl)",
     r"^(encoding/|reflect\.|time\.Time\.(MarshalBinary|GobEncode)|github\.com/mesh-verify/mesh-verify/runlog)"),
    ("context and timers", r"^(context|time)\."),
    ("vegeta (target, hit, result)", r"^github\.com/tsenart/vegeta"),
    ("mesh-verify attack (request id, result, body, response header, connection tracking)", r"^github\.com/mesh-verify/mesh-verify/attack"),
    ("mesh-verify attribution (the rules' captures)", r"^(regexp|github\.com/mesh-verify/mesh-verify/attribution)"),
    ("mesh-verify tally and sink", r"^github\.com/mesh-verify/mesh-verify/"),
]


def pprof_groups(prof, groups, extra=()):
    """Sums pprof -top's flat column (ms, or a count) per group of function
    names: first match wins, the rest is "other"."""
    top = run(["go", "tool", "pprof", "-top", "-nodecount=1000000", *extra, prof], timeout=120)
    need(top.code == 0, "go tool pprof -top", top)
    sums = {g: 0.0 for g, _ in groups}
    other, total = 0.0, 0.0
    for ln in top.out.splitlines():
        f = ln.split(None, 5)
        m = re.fullmatch(r"([\d.]+)(ms)?", f[0]) if len(f) == 6 and f[1].endswith("%") else None
        if not m:
            continue
        flat, name = float(m.group(1)), f[5].strip()
        total += flat
        for g, pat in groups:
            if re.match(pat, name):
                sums[g] += flat
                break
        else:
            other += flat
    sums["other"] = other
    return sums, total


def profile():
    """Where a whole mesh-verify run's client CPU goes: bench/profile's
    BenchmarkRunnerMaxRate (attack, attribution, tally and recording, against
    its own nginx) under -cpuprofile, each function's own time grouped by
    what it belongs to."""
    prof = os.path.join(OUT, "runner.cpu.prof")
    n = 100_000 if not QUICK else 30_000
    args = ["-run", "^$", "-bench", "^BenchmarkRunnerMaxRate$", "-benchtime", "1x", "-cpuprofile", prof, "-o", os.path.join(OUT, "profile.test")]
    log(f"  go test ./bench/profile/ {' '.join(args)} ({n} requests)")
    b = run(["go", "test", "./bench/profile/", "-count", "1"] + args, timeout=600,
            env_extra={"BENCH_PROFILE_REQUESTS": str(n)})
    m = re.search(r"([\d.]+) allocs/req", b.out)
    need(b.code == 0 and "BenchmarkRunnerMaxRate" in b.out, "go test -bench RunnerMaxRate ./bench/profile", b)
    groups, total = pprof_groups(prof, PROFILE_GROUPS, ["-unit=ms"])
    line = next((ln.strip() for ln in b.out.splitlines() if ln.startswith("BenchmarkRunnerMaxRate")), "")
    # The allocations in a run of their own: sampling them would slow the
    # CPU profile's allocator. One sample per 4 KB allocated; pprof scales
    # the counts back up.
    mprof = os.path.join(OUT, "runner.mem.prof")
    margs = ["-run", "^$", "-bench", "^BenchmarkRunnerMaxRate$", "-benchtime", "1x", "-memprofile", mprof, "-memprofilerate", "4096",
             "-o", os.path.join(OUT, "profile.test")]
    log(f"  go test ./bench/profile/ {' '.join(margs)} ({n} requests)")
    mb = run(["go", "test", "./bench/profile/", "-count", "1"] + margs, timeout=600, env_extra={"BENCH_PROFILE_REQUESTS": str(n)})
    need(mb.code == 0 and "BenchmarkRunnerMaxRate" in mb.out, "go test -bench RunnerMaxRate -memprofile ./bench/profile", mb)
    agroups, atotal = pprof_groups(mprof, ALLOC_GROUPS, ["-sample_index=alloc_objects"])
    return {"groups": groups, "total_ms": total, "requests": n, "bench": line, "allocs": m.group(1) if m else "?",
            "alloc_groups": agroups, "alloc_total": atotal}


# ---------------------------------------------------------------- report

def fmt_rate(x):
    return "-" if x is None else f"{x:,.0f}"


def fmt_ms(s):
    return "-" if s is None else f"{s * 1000:.2f} ms"


def fmt_secs(x):
    """
    >>> fmt_secs(59.4), fmt_secs(180), fmt_secs(409)
    ('59s', '3m00s', '6m49s')
    """
    x = int(round(x))
    return f"{x // 60}m{x % 60:02d}s" if x >= 60 else f"{x}s"


def spread(xs):
    return f"{min(xs):,.0f}–{max(xs):,.0f}" if len(xs) > 1 else "-"


MISSED = "**not met**"


def verdict(ok):
    return "met" if ok else MISSED


def missed_goals(lines):
    """The rows of the report's Targets table whose goal was missed, as
    (goal, measured): make bench exits non-zero on any of them.

    >>> missed_goals(["## Targets", "", "| target | measured | met? |", "|---|---|---|",
    ...               "| a ≥ 1.0× hey | 0.65× | **not met** |", "| b ≤ 40 MB | 31 MB | met |",
    ...               "| c | no measurement | not judged |", "", "## Commands", "| d | 2× | **not met** |"])
    [('a ≥ 1.0× hey', '0.65×')]
    >>> missed_goals(["## Targets", "| a | 1× | met |"])
    []
    """
    out, inside = [], False
    for ln in lines:
        if ln.startswith("## "):
            inside = ln == "## Targets"
            continue
        cells = [c.strip() for c in ln.strip().strip("|").split("|")] if inside and ln.startswith("|") else []
        if len(cells) >= 3 and cells[-1] == MISSED:
            out.append((cells[0], cells[1]))
    return out


def issue27_targets(w, ratios, cpus, best_mv, rt, mem, tun, prof, dem=None):
    """Issue 27's goals ("Lean and fast"), each as a ratio of this run."""
    for c in CONNS:
        mv, how = best_mv(c)
        hey = ratios.get((c, "hey"))
        if mv and hey:
            x = mv / hey
            w(f"| issue 27: throughput with attribution ≥ 1.0× hey at {c} connections | {x:.2f}× ({how}: {mv:,.0f} vs {hey:,.0f} req/s) | {verdict(x >= 1.0)} |")
    c = 32
    mvc = [(cpus[(c, t)], t) for t in ("mesh-verify open loop", "mesh-verify closed loop") if cpus.get((c, t))]
    if mvc and cpus.get((c, "hey")):
        cpu, t = min(mvc)
        x = cpu / cpus[(c, "hey")]
        w(f"| issue 27: CPU per request ≤ hey's at {c} connections | {x:.2f}× ({t}: {cpu:.2f} vs {cpus[(c, 'hey')]:.2f} CPU s / 100k requests) | {verdict(x <= 1.0)} |")
    if prof and prof.get("allocs", "?") != "?":
        a = float(prof["allocs"])
        w(f"| issue 27: allocations per request ≤ 40 (BenchmarkRunnerMaxRate: attack, attribution, tally, recording) | {a:.2f} | {verdict(a <= 40)} |")
    if rt:
        for r, p in rt:
            if r in (1000, 5000) and p["vegeta"].p99:
                x = p["mesh-verify"].p99 / p["vegeta"].p99
                w(f"| issue 27: p99 ≤ 1.2× vegeta's at {r:,}/s | {x:.2f}× ({fmt_ms(p['mesh-verify'].p99)} vs {fmt_ms(p['vegeta'].p99)}) | {verdict(x <= 1.2)} |")
    if mem:
        mv, vg = mem["runs"]["mesh-verify"].run, mem["runs"]["vegeta"].run
        x = mv.anon_mb / vg.anon_mb
        w(f"| issue 27: private memory (RssAnon) ≤ {ANON_GOAL}× vegeta's | {x:.2f}× ({mv.anon_mb:.1f} vs {vg.anon_mb:.1f} MB) | {verdict(x <= ANON_GOAL)} |")
        st = mem["startup"]
        a, b = st["mesh-verify"]["maxrss_mb"], st["vegeta"]["maxrss_mb"]
        w(f"| issue 27: `mesh-verify version` peak RSS ≤ 1.2× `vegeta -version`'s | {a / b:.2f}× ({a:.0f} vs {b:.0f} MB) | {verdict(a <= 1.2 * b)} |")
        size = st["mesh-verify"]["binary_mb"]
        w(f"| issue 27: executable ≤ 40 MB (make build: stripped, version kept) | {size:.1f} MB | {verdict(size <= 40)} |")
    if tun:
        a, b = tun.get("mesh-verify port-forward"), tun.get("kubectl port-forward")
        if a and b:
            na, nb = a["probe"].requests, b["probe"].requests
            own = a["chain"].get("mesh-verify", 0) / na * 1e6 if na else 0
            kub = b["chain"].get("kubectl", 0) / nb * 1e6 if nb else 0
            if own and kub:
                each = "; rounds: " + ", ".join(f"{v:.0f}" for v in a.get("rounds", [])) + " vs " + ", ".join(f"{v:.0f}" for v in b.get("rounds", []))
                w(f"| issue 27: tunnel CPU per 1,000 forwarded requests ≤ 0.6× kubectl's (median of {len(a.get('rounds', []))} probes) | "
                  f"{own / kub:.2f}× ({own:.0f} vs {kub:.0f} ms{each}) | {verdict(own <= 0.6 * kub)} |")
            x = a["best"] / b["best"] if b.get("best") else float("inf")
            w(f"| issue 27: tunnel max sustained rate ≥ kubectl's, 0 errors | {x:.2f}× ({a['best']:,} vs {b['best']:,} req/s) | {verdict(x >= 1.0)} |")
    dem = dem or {}
    warm, cold = dem.get("warm"), dem.get("cold")
    if warm:
        ok = warm["code"] == 0 and not warm["differs"]
        how = f"{fmt_secs(warm['wall'])}, {warm['rows'] - len(warm['differs'])} of {warm['rows']} verdicts as the tutorials'"
        judged = "not judged: a subset (MESH_VERIFY_DEMO_ONLY)" if warm["subset"] else verdict(ok and warm["wall"] <= DEMO_WARM_GOAL)
        w(f"| issue 27: warm `make demo` ≤ {fmt_secs(DEMO_WARM_GOAL)}, every verdict as its tutorial's | {how} | {judged} |")
        if cold:
            total = cold["lab"] + cold["build"] + warm["wall"]
            w(f"| issue 27: cold `make demo` ≤ {fmt_secs(DEMO_COLD_GOAL)} (builds from an empty Go cache + the warm demo) | "
              f"{fmt_secs(total)} ({fmt_secs(cold['lab'])} lab binaries + {fmt_secs(cold['build'])} mesh-verify + {fmt_secs(warm['wall'])} demo) | "
              f"{'not judged: a subset' if warm['subset'] else verdict(ok and total <= DEMO_COLD_GOAL)} |")
    if dem.get("ran") and not dem.get("cold_ran"):
        w(f"| issue 27: cold `make demo` ≤ {fmt_secs(DEMO_COLD_GOAL)} | not measured in this run: `BENCH_ONLY=\"demo-cold demo\" make bench` "
          "builds the lab's binaries from an empty Go cache (5 to 12 minutes of every core) | not judged |")


def gaps(w, ratios, cpus, mem, tun, prof):
    """What the unmet targets come down to, in this run's own figures."""
    L = []
    c = 32
    mv = [t for t in ("mesh-verify open loop", "mesh-verify closed loop") if cpus.get((c, t))]
    unmet = [peer for peer, goal in (("hey", 1.0), ("wrk", 0.55))
             if ratios.get((c, peer)) and max((ratios.get((c, t)) or 0) for t in mv or ["-"]) < goal * ratios[(c, peer)]]
    if mv and unmet and cpus.get((c, "hey")) and prof:
        best = max(mv, key=lambda t: ratios.get((c, t)) or 0)
        us = {t: cpus[(c, t)] * 10 for t in (best, "hey", "wrk", "vegeta") if cpus.get((c, t))}  # CPU s / 100k -> µs / request
        g, tot = prof["groups"], prof["total_ms"] or 1
        shared = sum(g[k] for k in g if k.startswith(("system calls", "goroutine scheduling", "Go's net", "fasthttp"))) / tot * 100
        sched = g.get("goroutine scheduling, channels, timers (runtime)", 0) / tot * 100
        ours = sum(g[k] for k in g if k.startswith("mesh-verify")) / tot * 100
        gc = g.get("allocation and garbage collection", 0) / tot * 100
        allocs = prof["allocs"]
        ag, areq = prof["alloc_groups"], prof["requests"]
        own = sum(v for k, v in ag.items() if k.startswith("mesh-verify")) / areq
        text = (f"- **Throughput at {c} connections** (not met against {' and '.join(unmet)}). The client's CPU is what limits every tool "
                f"here (nginx has one core of the two). Client CPU per request, from each process's rusage: {best} {us[best]:.1f} µs, "
                f"hey {us['hey']:.1f} µs" + (f", vegeta {us['vegeta']:.1f} µs" if "vegeta" in us else "")
                + (f", wrk {us['wrk']:.1f} µs" if "wrk" in us else "") + ". "
                f"In mesh-verify's profile, {shared:.0f}% of that time is system calls, goroutine scheduling and the HTTP/1.1 "
                f"machinery (fasthttp's writer and parser, Go's net and bufio), of which scheduling alone is {sched:.0f}%: the attack "
                "holds its connections itself (no reader and writer goroutine per connection, as net/http's client has, no "
                "context or timer per request), but a Go program still parks a worker goroutine on the network poller for every "
                "response, where wrk, a C event loop, reads whichever socket is ready. "
                f"mesh-verify's own packages (the engine, request ids, connection pools, attribution, tally, recording) take {ours:.0f}%, "
                f"allocation and GC {gc:.0f}% (every package's allocations: {allocs} per request, of which mesh-verify's own packages "
                f"make {own:.1f}: the result, the request id, the body, the response header, the rules' captures and what is recorded).")
        if us[best] > us["hey"]:
            text += (" What it spends over hey is each result's way to attribution and the run directory: hey keeps no "
                     "per-request record, attributes nothing and writes nothing.")
        L.append(text)
    if mem and (mem["runs"]["mesh-verify"].run.maxrss_mb > PEAK_RSS_GOAL * mem["runs"]["vegeta"].run.maxrss_mb
                or mem["runs"]["mesh-verify"].run.anon_mb > ANON_GOAL * mem["runs"]["vegeta"].run.anon_mb):
        r, v, st = mem["runs"]["mesh-verify"].run, mem["runs"]["vegeta"].run, mem["startup"]
        L.append(f"- **Peak RSS.** {r.file_mb:.0f} of mesh-verify's {r.maxrss_mb:.0f} MB are pages of its own executable "
                 f"(RssFile; vegeta {v.file_mb:.0f} MB): the binary is {st['mesh-verify']['binary_mb']:.0f} MB against vegeta's "
                 f"{st['vegeta']['binary_mb']:.0f} MB (stripped, with the narrow Kubernetes client, vegeta's library and the report writers), and "
                 f"`mesh-verify version` alone peaks at {st['mesh-verify']['maxrss_mb']:.0f} MB. Those pages are clean and shared, and "
                 f"the kernel can drop them. Private memory (RssAnon) is {r.anon_mb:.1f} MB against vegeta's {v.anon_mb:.1f} MB "
                 f"({r.anon_mb / v.anon_mb:.2f}×): mostly Go's heap, whose live part (package initialisation's tables, the attribution "
                 "queue, the tally, the run directory's writers, each connection's buffers) stays at about 2 MB from the first "
                 "collection to the last (GODEBUG=gctrace=1), and which the collector lets grow to 1.5 times that between collections "
                 "(mesh-verify sets GOGC=50 unless GOGC is set); none of it grows with the number of requests.")
    if tun:
        a, b = tun.get("mesh-verify port-forward"), tun.get("kubectl port-forward")
        if a and b and not (b.get("best") and a.get("best", 0) >= 2 * b["best"]):
            ca, cb = a["chain"], b["chain"]
            na, nb = a["probe"].requests or 1, b["probe"].requests or 1
            own = ca.get("mesh-verify", 0) / na * 1e6
            kub = cb.get("kubectl", 0) / nb * 1e6
            rest = sum(v for k, v in ca.items() if k not in ("mesh-verify",)) / na * 1e6
            L.append(f"- **Tunnel.** Every forwarded request crosses the forwarder, the kube-apiserver, kwok and the lab's app, all on this "
                     f"machine's {NPROC} cores. Per 1,000 requests the forwarder costs {own:.0f} ms of CPU (mesh-verify) against {kub:.0f} ms "
                     f"(kubectl), while the rest of the chain, the load generator included, costs {rest:.0f} ms: even a forwarder that cost "
                     f"nothing would raise the CPU-bound ceiling at most {(own + rest) / max(rest, 1e-9):.2f}× over mesh-verify's own. On a real cluster the API server and the kubelet "
                     "run elsewhere, and the forwarder's own cost is what the user's machine pays.")
    if L:
        w("## What the unmet targets come down to")
        w("")
        for ln in L:
            w(ln)
        w("")


def write_report(info, thr, rt, mem, tun, ing, gob, prof, cmds, errors, dem=None):
    dem = dem or {}
    tools, res, failed = thr if thr else ([], {}, [])
    L = []
    w = L.append
    w("# BENCHMARKS")
    w("")
    w("Generated by `make bench` (bench/run.sh, bench/bench.py); do not edit by hand. "
      "Every figure comes from one run on the machine below; ratios compare tools measured in the same run.")
    w("")
    w(f"- Date: {info['date']}  ")
    w(f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['kernel']}  ")
    w(f"- Load average before / after the run: {info['load0']} / {info['load1']}  ")
    w(f"- Shared machine: {info['shared']}  ")
    w(f"- Mode: {'QUICK (BENCH_QUICK=1: short runs, one round — for development, not for conclusions)' if QUICK else 'full'}; "
      f"wall time {info['wall']:.0f} s  ")
    w(f"- Target: nginx `return 200` (46-byte body), 1 worker process, keep-alive, on 127.0.0.1; "
      f"every tool keeps connections alive.  ")
    w("")
    w("Tool versions:")
    w("")
    for k, v in info["versions"].items():
        w(f"- {k}: `{v}`")
    w("")
    if errors:
        w("## Sections that failed")
        w("")
        for e in errors:
            w(f"- {e}")
        w("")

    ratios, cpus = {}, {}
    if thr:
        w(f"## Max throughput ({DUR} s a run, {ROUNDS} interleaved round{'s' if ROUNDS > 1 else ''}, tool order rotated each round)")
        w("")
        w("Requests per second: median, and min–max over the rounds. mesh-verify runs with attribution on "
          "(the tutorial preset and a body rule), writing its run directory (report.json, results.bin, attribution.jsonl) "
          "as `mesh-verify run --out` does. Open loop: `rate: 1000000/s` with `concurrency` capping the workers; closed loop: "
          "`concurrency` workers back to back. vegeta: `-rate=0 -workers=N -max-workers=N`. "
          "Best peer: the best of vegeta, hey and siege; wrk is the ceiling.")
        w("")
        for c in CONNS:
            meds = {t: med([r.rate for r in res[(c, t)]]) for t in tools}
            wrk_med = meds["wrk"]
            peers = {t: meds[t] for t in ("vegeta", "hey", "siege") if meds[t]}
            best_peer = max(peers, key=lambda t: peers[t]) if peers else None

            def ratio(m, base):
                return f"{m / base:.2f}" if m and base else "-"
            w(f"### {c} connections")
            w("")
            w(f"| tool | req/s median | min–max | × wrk | × best peer ({best_peer}) | errors | CPU s / 100k req | runs |")
            w("|---|---:|---:|---:|---:|---:|---:|---:|")
            for t in tools:
                rs = res[(c, t)]
                m = meds[t]
                ratios[(c, t)] = m
                cpu = med([r.cpu_per_100k for r in rs])
                cpus[(c, t)] = cpu
                w(f"| {t} | {fmt_rate(m)} | {spread([r.rate for r in rs])} | {ratio(m, wrk_med)} | {ratio(m, peers.get(best_peer))} | "
                  f"{sum(r.errors for r in rs)} | {'-' if cpu is None else f'{cpu:.2f}'} | {len(rs)} |")
            w("")
        if failed:
            w("Runs that failed (left out of the medians):")
            w("")
            for f in failed:
                w(f"- {f}")
            w("")
        w("CPU seconds per 100k requests: user + system time of the tool's process from its rusage (for vegeta, "
          "`vegeta attack` plus `vegeta report`), divided by the requests it sent; median over the rounds. "
          "The target (nginx) is not counted. A tool that sends more requests in the same time is not charged more for it.")
        w("")

    if rt:
        w(f"## Rate accuracy and latency at fixed rates ({RATE_DUR} s each, open loop)")
        w("")
        w("Achieved / requested is the rate at which requests were sent over the attack's duration "
          "(mesh-verify's `attack.achievedRate`, vegeta's `rate`). mesh-verify: `rate: N/s` (10 connections, attribution on); "
          "vegeta: `-rate=N` (its default workers).")
        w("")
        w("| rate | mesh-verify achieved/requested | vegeta achieved/requested | mesh-verify p50 | vegeta p50 | mesh-verify p99 | vegeta p99 | p99 × vegeta | errors (mv / vegeta) |")
        w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for rate, pair in rt:
            m, v = pair["mesh-verify"], pair["vegeta"]
            w(f"| {rate:,}/s | {m.rate / rate:.3f} | {v.rate / rate:.3f} | {fmt_ms(m.p50)} | {fmt_ms(v.p50)} | {fmt_ms(m.p99)} | "
              f"{fmt_ms(v.p99)} | {m.p99 / v.p99:.2f} | {m.errors} / {v.errors} |")
        w("")

    if mem:
        w(f"## Peak resident memory over {MEM_REQUESTS:,} requests or {MEM_DURATION} s, whichever comes first (32 connections, closed loop)")
        w("")
        w("Peak RSS is the process's `ru_maxrss` from wait4 (the kernel's high-water mark, not a sample). "
          f"vegeta reads {MEM_REQUESTS:,} targets lazily (`-lazy`) so that it stops after exactly that many; its RSS is `vegeta attack`'s. "
          f"The 10k-pods run's target names one of {PODS:,} pods per request (nginx `split_clients` over `$request_id`): "
          "mesh-verify keeps at most 1,000 distinct values per dimension (README.md, Limits), the rest count as `(other)`.")
        w("")
        w("| run | requests | req/s | errors | peak RSS | × vegeta | peak private (RssAnon) | × vegeta | peak file-backed (RssFile) |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        runs = mem["runs"]
        v = runs["vegeta"].run
        for k, r in runs.items():
            w(f"| {k} | {r.requests:,} | {fmt_rate(r.rate)} | {r.errors} | {r.run.maxrss_mb:.0f} MB | {r.run.maxrss_mb / v.maxrss_mb:.2f} | "
              f"{r.run.anon_mb:.1f} MB | {r.run.anon_mb / v.anon_mb:.2f} | {r.run.file_mb:.1f} MB |")
        w("")
        w(f"RssAnon and RssFile are read from `/proc/PID/status` every {MEM_SAMPLE * 1000:.0f} ms while the process runs (samples, "
          "each column its own maximum). RssAnon is the process's private memory (heap, stacks); RssFile is the pages of "
          "its executable and libraries mapped from their files: clean, shared with every other process running the same file, "
          "and the kernel can drop them under pressure. ru_maxrss counts both.")
        w("")
        w("Before the first request (the process started and exited at once):")
        w("")
        w("| tool | command | peak RSS | executable size |")
        w("|---|---|---:|---:|")
        for k, st in mem["startup"].items():
            w(f"| {k} | `{st['cmd']}` | {st['maxrss_mb']:.0f} MB | {st['binary_mb']:.0f} MB |")
        w("")

    if tun:
        w(f"## Tunnel vs `kubectl port-forward` (lab cluster: real kube-apiserver + kwok, one pod)")
        w("")
        w(f"Both forward to the same callme pod of a one-cluster lab (`mesh-verify lab up --topology bench/tunnel-topology.yaml`). "
          f"Both forwarders run at once; {TUNNEL_ROUNDS} closed-loop probes of each, {TUNNEL_PROBE} s ({TUNNEL_CONNS} connections, vegeta), "
          "alternate between them (the order rotated each round), and the round with the median forwarder CPU per request gives each "
          "one's ceiling and the CPU figures below; then open-loop runs of "
          f"{TUNNEL_DUR} s step down from 90% of it (70%, 50%) until one has zero errors and holds its rate (≥ 98% of it answered in time): "
          "that rate is the max sustained rate.")
        w("")
        w("| forward | probe req/s (errors) | sustained runs: rate → errors, throughput | max sustained rate, 0 errors |")
        w("|---|---:|---|---:|")
        for name, t in tun.items():
            pr = t["probe"]
            tries = "; ".join(f"{want:,}/s → {r.errors} err, {r.extra['throughput']:,.0f}/s" for want, r, _ in t["tries"])
            best = max([want for want, _, held in t["tries"] if held], default=0)
            t["best"] = best
            w(f"| {name} | {fmt_rate(pr.rate)} ({pr.errors}) | {tries} | {best:,}/s |")
        w("")
        w("CPU of every process a forwarded request crosses, during each probe (from `/proc/PID/stat`), in ms per 1,000 requests: "
          "on this machine's cores the forwarder is one of several processes of like cost, so even a forwarder that cost "
          "nothing would raise the ceiling only by its own share.")
        w("")
        names = sorted({k for t in tun.values() for k in t["chain"]})
        w("| process | " + " | ".join(tun) + " |")
        w("|---|" + "---:|" * len(tun))
        for pn in names:
            cells = []
            for t in tun.values():
                n = t["probe"].requests
                v = t["chain"].get(pn)
                cells.append("-" if v is None or not n else f"{v / n * 1000 * 1000:.0f}")
            w(f"| {pn} | " + " | ".join(cells) + " |")
        w("")

    if dem.get("warm"):
        d, c = dem["warm"], dem.get("cold")
        w("## make demo")
        w("")
        w(f"`make demo` as a user runs it once the lab's binaries are built (scripts/demo.sh: every seed experiment in its lab, "
          f"labs side by side, judged): {fmt_secs(d['wall'])} wall, exit {d['code']}, {d['rows'] - len(d['differs'])} of {d['rows']} verdicts as the tutorials'"
          + (f" (differs: {', '.join(d['differs'])})" if d["differs"] else "") + ".")
        if c:
            w("")
            w(f"From an empty Go build cache (modules already downloaded): the lab's Kubernetes binaries {fmt_secs(c['lab'])}, "
              f"mesh-verify {fmt_secs(c['build'])}.")
        w("")

    if ing:
        w("## Log ingestion (one core)")
        w("")
        w(f"{ing['lines']:,} lines ({ing['bytes'] / 1e6:.0f} MB) of an Istio sidecar's access log with the kubelet's timestamps, "
          f"half inbound (matched: {ing['matched']:,}), half outbound. mesh-verify: `BenchmarkIngestFile` (podlogs/ingest_bench_test.go, "
          "`-cpu 1`): read, decode the timestamp, match the `istio-proxy` preset's regex with its named groups, parse the request id, "
          "count per pod — what the follower does per line. grep: `LC_ALL=C grep -c -F 'inbound|'` on the same file "
          "(counts a fixed string, extracts nothing), median of 3, the file in the page cache.")
        w("")
        w("Per CPU second is matched lines over the process's own user + system time (what one core does, whatever else "
          "runs on the machine); per wall second is over elapsed time.")
        w("")
        w("| reader | matched lines / CPU s | matched lines / wall s |")
        w("|---|---:|---:|")
        w(f"| mesh-verify podlogs | {ing['mesh-verify cpu']:,.0f} | {ing['mesh-verify']:,.0f} |")
        w(f"| grep -c | {ing['grep cpu']:,.0f} | {ing['grep']:,.0f} |")
        w("")

    if gob:
        w("## Go benchmarks with goals of their own")
        w("")
        w("Rendering every report format of a 1,000,000-request run (goal < 2 s, report.html < 3 MB) and streaming every "
          "result to results.bin and attribution.jsonl (runlog Throughput: rps with / without recording, goal ratio ≥ 0.95; "
          "its server is in the same process).")
        w("")
        w("```")
        for ln in gob:
            w(ln)
        w("```")
        w("")

    if prof:
        w("## Where mesh-verify's client CPU goes")
        w("")
        w(f"`go test ./bench/profile/ -bench RunnerMaxRate -cpuprofile` runs one whole `mesh-verify run` in process "
          f"({prof['requests']:,} requests, 32 connections, closed loop, attribution on, recording its run directory) against its own nginx; "
          "each function's own CPU time (pprof's flat) is grouped by what it belongs to. The allocation and GC row is paid "
          "for every package's allocations, ours and the libraries' alike. The attack's engine is fasthttp's "
          "(plain HTTP/1.1: the run's report.json says `attack.engine`).")
        w("")
        w(f"    {prof['bench']}")
        w("")
        w("| where | share of the client's CPU | µs per request |")
        w("|---|---:|---:|")
        tot = prof["total_ms"] or 1
        for g, ms in sorted(prof["groups"].items(), key=lambda kv: -kv[1]):
            w(f"| {g} | {ms / tot * 100:.1f}% | {ms * 1000 / prof['requests']:.1f} |")
        w(f"| total | 100% | {tot * 1000 / prof['requests']:.1f} |")
        w("")
        w(f"Allocations per request, by the function that makes them (the same run again under `-memprofile`, "
          f"one sample per 4 KB, scaled back by pprof; the benchmark's own exact count is {prof['allocs']} per request):")
        w("")
        w("| made by | allocations per request | share |")
        w("|---|---:|---:|")
        atot = prof["alloc_total"] or 1
        for g, k in sorted(prof["alloc_groups"].items(), key=lambda kv: -kv[1]):
            w(f"| {g} | {k / prof['requests']:.1f} | {k / atot * 100:.0f}% |")
        w(f"| total (sampled) | {atot / prof['requests']:.1f} | 100% |")
        w("")

    w("## Targets")
    w("")
    w("| target | measured | met? |")
    w("|---|---|---|")

    def best_mv(c):
        o, k = ratios.get((c, "mesh-verify open loop")) or 0, ratios.get((c, "mesh-verify closed loop")) or 0
        return (o, "open loop") if o >= k else (k, "closed loop")

    def target(name, c, peer, goal):
        mv, how = best_mv(c)
        base = ratios.get((c, peer))
        if not mv or not base:
            w(f"| {name} | no measurement (see the failed runs above) | not judged |")
            return
        x = mv / base
        w(f"| {name} | {x:.2f}× ({how}: {mv:,.0f} vs {base:,.0f} req/s) | {verdict(x >= goal)} |")
    if thr and 32 in CONNS:
        target("max throughput with attribution ≥ 1.0× hey at 32 connections", 32, "hey", 1.0)
        target("max throughput with attribution ≥ 0.55× wrk at 32 connections", 32, "wrk", 0.55)
    if thr and 128 in CONNS:
        target("max throughput with attribution ≥ 1.0× vegeta at 128 connections", 128, "vegeta", 1.0)
    if rt:
        def held(r, rate):
            return r.rate >= 0.99 * rate and r.errors == 0
        top = [p for r, p in rt if r == max(RATES)][0]
        x = top["mesh-verify"].p99 / top["vegeta"].p99
        short = [t for t in ("mesh-verify", "vegeta") if not held(top[t], max(RATES))]
        if not short:
            w(f"| p99 at {max(RATES):,}/s ≤ 1.5× vegeta's | {x:.2f}× ({fmt_ms(top['mesh-verify'].p99)} vs {fmt_ms(top['vegeta'].p99)}) | {verdict(x <= 1.5)} |")
        else:
            # Past the rate a tool can send, its p99 is the age of a
            # backlog, not a latency: the target is judged at the highest
            # rate both held, and the unheld one is shown for the record.
            both = [(r, p) for r, p in rt if held(p["mesh-verify"], r) and held(p["vegeta"], r)]
            w(f"| p99 at {max(RATES):,}/s ≤ 1.5× vegeta's | {x:.2f}× ({fmt_ms(top['mesh-verify'].p99)} vs {fmt_ms(top['vegeta'].p99)}) | "
              f"not judged: {' and '.join(short)} did not hold the rate (a backlog, not latency) |")
            if both:
                r, p = both[-1]
                y = p["mesh-verify"].p99 / p["vegeta"].p99
                w(f"| p99 ≤ 1.5× vegeta's at the highest rate both held ({r:,}/s) | {y:.2f}× ({fmt_ms(p['mesh-verify'].p99)} vs {fmt_ms(p['vegeta'].p99)}) | {verdict(y <= 1.5)} |")
    if mem:
        mv, vg = mem["runs"]["mesh-verify"], mem["runs"]["vegeta"]
        x = mv.run.maxrss_mb / vg.run.maxrss_mb
        w(f"| peak RSS ≤ {PEAK_RSS_GOAL}× vegeta's ({mv.requests:,} and {vg.requests:,} requests) | {x:.2f}× ({mv.run.maxrss_mb:.0f} vs {vg.run.maxrss_mb:.0f} MB); "
          f"private memory {mv.run.anon_mb / vg.run.anon_mb:.2f}× ({mv.run.anon_mb:.1f} vs {vg.run.anon_mb:.1f} MB) | {verdict(x <= PEAK_RSS_GOAL)} |")
    if tun:
        a, b = tun["mesh-verify port-forward"]["best"], tun["kubectl port-forward"]["best"]
        x = a / b if b else float("inf")
        # Issue 14's rate goal is bound by the chain a forwarded request
        # crosses on this machine's cores, not by the forwarder (What the
        # unmet targets come down to); issue 27 replaced it with the
        # forwarder's own CPU and a rate at least kubectl's (below), so a
        # miss is shown and explained but does not fail make bench.
        w(f"| tunnel ≥ 2× kubectl port-forward's max sustained rate, 0 errors for {TUNNEL_DUR} s (issue 14) | {x:.2f}× ({a:,} vs {b:,} req/s) | "
          f"{'met' if x >= 2 else 'not met; superseded by issue 27 (tunnel CPU and rate, below)'} |")
    try:
        issue27_targets(w, ratios, cpus, best_mv, rt, mem, tun, prof, dem)
    except Exception as e:  # noqa: BLE001 - a bug here must not cost the run's report
        w(f"| issue 27's targets | could not be judged: {e} | not judged |")
    if ing:
        x = ing["mesh-verify cpu"]
        w(f"| log ingestion ≥ 300k matched lines/s on one core | {x:,.0f} lines per CPU second ({x / ing['grep cpu']:.2f}× grep -c) | {verdict(x >= 300_000)} |")
    w("")
    gaps(w, ratios, cpus, mem, tun, prof)
    w("## Commands")
    w("")
    w("Exactly as run (N connections, D seconds, R rate; scenario files are written to bench/out/):")
    w("")
    w("```")
    for c in cmds:
        w(c)
    w("```")
    w("")
    with open(REPORT, "w") as f:
        f.write("\n".join(L))
    log(f"wrote {REPORT}")
    return missed_goals(L)


def main():
    t0 = time.time()
    os.makedirs(OUT, exist_ok=True)
    # The previous bench's run directories (results.bin of a million
    # requests each): kept for inspection until the next bench.
    shutil.rmtree(os.path.join(OUT, "runs"), ignore_errors=True)
    load0 = open("/proc/loadavg").read().split()[:3]
    cpu = "?"
    for ln in open("/proc/cpuinfo"):
        if ln.startswith("model name"):
            cpu = ln.split(":", 1)[1].strip()
            break
    nd = tempfile.mkdtemp(prefix="mesh-verify-bench-nginx-")
    port, pods_port = free_port(), free_port()
    with open(f"{nd}/nginx.conf", "w") as f:
        f.write(nginx_conf(nd, port, pods_port, PODS))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    ng = start([nginx, "-p", nd, "-c", f"{nd}/nginx.conf"], open(f"{nd}/stdout.log", "w"))
    url = f"http://127.0.0.1:{port}/callme/ping"
    pods_url = f"http://127.0.0.1:{pods_port}/callme/ping"
    thr = rt = mem = tun = ing = gob = prof = None
    dem = {}
    errors = []
    try:
        wait_port(port)
        wait_port(pods_port)
        only = set(os.environ.get("BENCH_ONLY", "throughput rates memory tunnel ingestion go profile demo").split())
        sections = [("throughput", lambda: throughput(url)), ("rates", lambda: rates(url)),
                    ("memory", lambda: memory(url, pods_url)), ("tunnel", tunnel), ("ingestion", ingestion), ("go", gobench),
                    ("profile", profile), ("demo-cold", demo_cold), ("demo", demo)]
        got = {}
        for name, fn in sections:
            if name not in only:
                continue
            log(f"== {name} ({time.time() - t0:.0f}s so far)")
            try:
                got[name] = fn()
            except Exception as e:  # noqa: BLE001 - one broken section is reported, the others still run
                errors.append(f"{name}: {e}".replace("\n", " "))
                log(f"{name} failed: {e}")
        thr, rt, mem, tun, ing, gob, prof = (got.get(k) for k in ("throughput", "rates", "memory", "tunnel", "ingestion", "go", "profile"))
        dem = {"warm": got.get("demo"), "cold": got.get("demo-cold"), "ran": "demo" in only, "cold_ran": "demo-cold" in only}
    finally:
        stop(ng)
        shutil.rmtree(nd, ignore_errors=True)
        cleanup()
    load1 = open("/proc/loadavg").read().split()[:3]
    shared = NOTE or ("probably (load average {} before a run on {} CPUs); set BENCH_NOTE to say".format(load0[0], NPROC)
                      if float(load0[0]) > 0.5 else "no other load seen at the start (load average {})".format(load0[0]))
    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": NPROC, "cpu": cpu,
            "kernel": os.uname().release, "load0": " ".join(load0), "load1": " ".join(load1), "shared": shared,
            "wall": time.time() - t0, "versions": versions()}
    cmds = [
        "nginx -p DIR -c DIR/nginx.conf   # worker_processes 1; return 200; keepalive_requests 10000000",
        f"bin/mesh-verify run SCENARIO --quiet --out DIR   # attack: {{rate: 1000000/s, concurrency: N, duration: {DUR}s}} (open) / {{concurrency: N, duration: {DUR}s}} (closed)",
        f"vegeta attack -targets=T -rate=0 -workers=N -max-workers=N -duration={DUR}s | vegeta report -type=json",
        f"hey -z {DUR}s -c N URL",
        f"siege -R bench/out/siegerc -b -c N -t {DUR}S URL   # siegerc: connection = keep-alive, logging = false",
        f"wrk -t{NPROC} -cN -d{DUR}s --latency URL   # -t min(nproc, N)",
        f"bin/mesh-verify run SCENARIO   # attack: {{rate: R/s, duration: {RATE_DUR}s}}",
        f"vegeta attack -targets=T -rate=R -duration={RATE_DUR}s | vegeta report -type=json",
        f"bin/mesh-verify run SCENARIO   # attack: {{concurrency: 32, requests: {MEM_REQUESTS}, duration: {MEM_DURATION}s}}",
        f"vegeta attack -lazy -targets=T{MEM_REQUESTS} -rate=0 -workers=32 -max-workers=32 -duration={MEM_DURATION}s | vegeta report -type=json",
        "bin/mesh-verify lab up --topology bench/tunnel-topology.yaml --dir bench/out/lab",
        "bin/mesh-verify port-forward --kubeconfig K --context kind-c1 -n default pod/POD :8080",
        "kubectl --kubeconfig K --context kind-c1 -n default port-forward --address 127.0.0.1 pod/POD :8080",
        f"vegeta attack -rate=0 -workers={TUNNEL_CONNS} -max-workers={TUNNEL_CONNS} -duration={TUNNEL_PROBE}s   # probe, then:",
        f"vegeta attack -rate=R -duration={TUNNEL_DUR}s -max-workers={TUNNEL_CONNS * 2}",
        "BENCH_INGEST_FILE=F go test ./podlogs/ -run '^$' -bench '^BenchmarkIngestFile$' -benchtime 1x -cpu 1",
        "LC_ALL=C grep -c -F 'inbound|' F",
    ]
    cmds += ["bash scripts/demo.sh   # make demo, MESH_VERIFY_DEMO_OUT=bench/out/demo, lab binaries cached",
             "GOCACHE=EMPTY MESH_VERIFY_LAB_BIN=EMPTY bash tools/lab/build.sh; GOCACHE=EMPTY make build   # BENCH_ONLY=demo-cold only"]
    missed = write_report(info, thr, rt, mem, tun, ing, gob, prof, cmds, errors, dem)
    if tun:
        log("tunnel: " + ", ".join(f"{k} {v['best']}/s" for k, v in tun.items()))
    # A missed goal fails make bench (issue 27: a regression must not pass
    # quietly); the load average is printed beside it so that a run on a
    # busy machine is seen as such before anyone chases the figure.
    for goal, measured in missed:
        log(f"goal missed: {goal}: {measured}")
    if errors:
        log(f"{len(errors)} section(s) failed: " + "; ".join(errors))
    if missed or errors:
        log(f"make bench: {len(missed)} goal(s) missed, {len(errors)} section(s) failed "
            f"(load average before / after: {info['load0']} / {info['load1']} on {NPROC} CPUs; {shared}); see {REPORT}")
        return 2 if errors else 1
    log(f"make bench: every goal met (load average before / after: {info['load0']} / {info['load1']})")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sys.exit(main())
    finally:
        cleanup()
