package judge

import (
	"fmt"
	"maps"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// MeshSplit is a split whose expected shares come from the mesh's own
// objects (split.fromMesh), as the run read them: the expectation, or why
// it could not be derived.
type MeshSplit struct {
	Expected meshconfig.Expected
	Err      error
	// Windows are the versions in force in each window of a split that
	// follows the object (split.windows.follow), the first read at the
	// start; nil until the run has stopped following it.
	Windows []MeshWindow
}

// Mesh holds what the run read from the mesh, keyed by the scenario's
// fromMesh it is for (the pointers of sc.Expect's splits and mirrors).
type Mesh map[*scenarios.MeshSource]MeshSplit

// FromMesh is one expectation (a split or a mirror) whose expected shares
// the mesh's objects define, and the query's parameters it sets.
type FromMesh struct {
	Name   string
	Source *scenarios.MeshSource
	// By is the split's dimension; a mirror's copies go to a version.
	By string
	// Connections is the split's own concurrency (split.connections).
	Connections int
	// Windows is the split's split.windows (nil for a mirror).
	Windows *scenarios.Windows
}

// FromMeshSources are the scenario's expectations with fromMesh, in file
// order: what a run reads from the clusters once they are connected.
func FromMeshSources(sc *scenarios.Scenario) []FromMesh {
	var out []FromMesh
	for _, e := range Resolve(sc) {
		switch k := e.kind.(type) {
		case splitKind:
			if k.sp.FromMesh != nil {
				out = append(out, FromMesh{Name: e.Name(), Source: k.sp.FromMesh, By: k.sp.By, Connections: k.sp.Connections, Windows: k.sp.Windows})
			}
		case mirrorKind:
			if k.m.FromMesh != nil {
				out = append(out, FromMesh{Name: e.Name(), Source: k.m.FromMesh, By: meshconfig.ByVersion})
			}
		}
	}
	return out
}

// WithMesh gives the judge the expected splits read from the mesh; a
// split with fromMesh that m lacks cannot be judged (its model errs).
func (j *Judge) WithMesh(m Mesh) *Judge {
	j.mesh = m
	return j
}

// meshModel is the expected shares of a split with fromMesh, with the
// objects they were read from (kind, name, resourceVersion, fields) in
// the explanation, so the report records what the verdict was judged
// against.
func (j *Judge) meshModel(sp *scenarios.Split) (assert.Shares, error) {
	ref, _, _ := sp.FromMesh.Ref()
	ms, ok := j.mesh[sp.FromMesh]
	if !ok {
		return assert.Shares{}, fmt.Errorf("split.fromMesh: the expected shares from %s were not read (a run reads them once the clusters are connected)", ref.Object())
	}
	if ms.Err != nil {
		return assert.Shares{}, fmt.Errorf("from %s: %w", ref.Object(), ms.Err)
	}
	ex := ms.Expected
	return assert.Shares{
		Shares:      maps.Clone(ex.Shares),
		Model:       scenarios.ModelFromMesh + ": " + ex.Model,
		Explanation: append(ex.Provenance(), ex.Explanation...),
	}, nil
}

// meshMirror is the percentage of a mirror with fromMesh, as the object
// defines it, with the provenance: the object must mirror the matched
// requests to exactly one destination.
func (j *Judge) meshMirror(m *scenarios.MirrorExpect) (float64, []string, error) {
	ref, _, _ := m.FromMesh.Ref()
	ms, ok := j.mesh[m.FromMesh]
	switch {
	case !ok:
		return 0, nil, fmt.Errorf("mirror.fromMesh: the percentage from %s was not read (a run reads it once the clusters are connected)", ref.Object())
	case ms.Err != nil:
		return 0, nil, fmt.Errorf("from %s: %w", ref.Object(), ms.Err)
	}
	mirrors := ms.Expected.Mirrors
	switch len(mirrors) {
	case 0:
		return 0, nil, fmt.Errorf("%s mirrors none of the attack's requests (rule %s)", ref.Object(), ms.Expected.Rule)
	case 1:
		return mirrors[0].Percent, ms.Expected.Provenance(), nil
	}
	return 0, nil, fmt.Errorf("%s mirrors to %d destinations: give the mirror's percent", ref.Object(), len(mirrors))
}
