package worker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/fleet"
)

// Options that cannot work are refused before any cluster is contacted,
// and without a record: there is no worker to speak for.
func TestRunOptionsChecked(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{ConfigMap: "cm", Index: -1}, "worker index -1: want 0 to 9999"},
		{Options{ConfigMap: "cm", Index: fleet.MaxWorkers}, "worker index 10000"},
		{Options{}, "--configmap: required"},
		{Options{ConfigMap: "cm", StartTimeout: MaxStartTimeout + time.Second}, "--start-timeout 1h0m1s: want a duration up to 1h0m0s"},
		{Options{ConfigMap: "cm", StartTimeout: -time.Second}, "--start-timeout -1s"},
		{Options{ConfigMap: "cm", Index: 2, IndexOffset: fleet.MaxWorkers - 2}, "--index-offset 9998: want 0 to 9999 less the index 2"},
		{Options{ConfigMap: "cm", IndexOffset: -1}, "--index-offset -1"},
	} {
		var out bytes.Buffer
		c.o.Records = &out
		err := Run(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%+v: printed %q", c.o, out.String())
		}
	}
}

// A kubeconfig that cannot be loaded is an error record naming it, and
// the record reads back with fleet's decoder.
func TestRunErrorRecord(t *testing.T) {
	var out, log bytes.Buffer
	missing := t.TempDir() + "/no-kubeconfig"
	o := Options{ConfigMap: "cm", Index: 3, Pod: "mv-w-3", Records: &out, Log: &log}
	o.Kube.Kubeconfig = []string{missing}
	if err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "load kubeconfig") {
		t.Fatalf("error %v", err)
	}
	rec, derr := fleet.NewDecoder(&out).Next()
	if derr != nil || rec.Kind != fleet.KindError || rec.Worker != 3 || rec.Pod != "mv-w-3" || !strings.Contains(rec.Error, missing) {
		t.Fatalf("record %+v, %v", rec, derr)
	}
}

func TestInventoryBound(t *testing.T) {
	pod := `{"cluster":"c1","name":"p"}`
	for _, c := range []struct {
		n  int
		ok bool
	}{{MaxInventoryPods, true}, {MaxInventoryPods + 1, false}} {
		d := goodData(t)
		d[KeyInventory] = "[" + strings.Repeat(pod+",", c.n-1) + pod + "]"
		_, err := ParseConfig("demo/mv", d)
		if c.ok != (err == nil) || !c.ok && !strings.Contains(err.Error(), "25001 pods, at most 25000") {
			t.Errorf("%d pods: %v", c.n, err)
		}
	}
}

// An error text past fleet.MaxErrorBytes is cut so that the record still
// decodes on the coordinator's side, whatever runes stand at the cut.
func TestLongErrorRecordDecodes(t *testing.T) {
	for _, tail := range []string{"≤≤≤≤", "aaaa", "é€😀"} {
		for pad := range 4 {
			text := strings.Repeat("a", fleet.MaxErrorBytes-8+pad) + strings.Repeat(tail, 4)
			var out bytes.Buffer
			e := &emitter{w: &out, worker: 1, pod: "mv-w-1"}
			if err := e.emit(fleet.KindError, nil, text); err != nil {
				t.Fatal(err)
			}
			rec, err := fleet.NewDecoder(&out).Next()
			if err != nil || rec.Kind != fleet.KindError || !strings.HasSuffix(rec.Error, "...") || !strings.HasPrefix(text, strings.TrimSuffix(rec.Error, "...")) {
				t.Errorf("tail %q pad %d: record %q, %v", tail, pad, rec.Error, err)
			}
		}
	}
}
