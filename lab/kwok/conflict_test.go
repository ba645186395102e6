package kwok

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A real /proc/net/tcp excerpt: one listener on 127.0.0.1:32766 (7FFE),
// one established connection from that port, one listener elsewhere.
const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7FFE 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333186 1 0000000000000000 100 0 0 10 0
   1: 0100007F:7FFE 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 444444 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:AADD 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 334763 2 0000000000000000 100 0 0 10 0
   3: garbage
`

func TestListeningInodes(t *testing.T) {
	for port, want := range map[int]string{32766: "333186", 43741: "334763", 80: ""} {
		if got := strings.Join(listeningInodes([]byte(procNetTCP), port), ","); got != want {
			t.Errorf("listeningInodes(port %d) = %q, want %q", port, got, want)
		}
	}
}

func FuzzListeningInodes(f *testing.F) {
	f.Add([]byte(procNetTCP), 32766)
	f.Add([]byte("0: 0100007F:FFFFF 0 0A a b c d e 12"), 65535)
	f.Fuzz(func(t *testing.T, table []byte, port int) {
		for _, in := range listeningInodes(table, port) {
			if in == "" || in == "0" || strings.Trim(in, "0123456789") != "" {
				t.Fatalf("inode %q is not a socket inode", in)
			}
		}
	})
}

// PortHolder finds the process listening on a real port: this test.
func TestPortHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if got, want := PortHolder(port), fmt.Sprintf("pid %d (", os.Getpid()); !strings.HasPrefix(got, want) {
		t.Errorf("PortHolder(%d) = %q, want it to start with %q", port, got, want)
	}
	ln.Close()
	if got := PortHolder(port); got != "" {
		t.Errorf("PortHolder(%d) after close = %q, want none", port, got)
	}
}

// The bind failure of a component, as etcd and the kube binaries log it,
// names the component, the port and who holds it now.
func TestFindPortConflict(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if pc := findPortConflict(dir, "c1"); pc != nil {
		t.Fatalf("conflict %v in a cluster without logs", pc)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, "logs", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etcd.log", `{"level":"info","msg":"serving client traffic"}`+"\n")
	write("kube-apiserver.log", fmt.Sprintf("I1130 12:00:00.000 1 server.go:1] Version: v1.36.1\n"+
		"E1130 12:00:01.000 1 run.go:72] \"command failed\" err=\"failed to create listener: failed to listen on 127.0.0.1:%d: listen tcp 127.0.0.1:%d: bind: address already in use\"\n", port, port))
	pc := findPortConflict(dir, "c1")
	if pc == nil || pc.Component != "kube-apiserver" || pc.Port != port || !strings.HasPrefix(pc.Holder, fmt.Sprintf("pid %d ", os.Getpid())) {
		t.Fatalf("conflict %+v; want kube-apiserver on %d held by this test", pc, port)
	}
	pc.Attempts = 3
	for _, want := range []string{"lab cluster c1", fmt.Sprintf("port %d", port), "kube-apiserver", fmt.Sprintf("pid %d", os.Getpid()), "without reserving", "3 times"} {
		if !strings.Contains(pc.Error(), want) {
			t.Errorf("error %q does not say %q", pc.Error(), want)
		}
	}
}
