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
}

// Mesh holds the expected splits read from the mesh, keyed by the
// scenario's split they are for (the pointers of sc.Expect).
type Mesh map[*scenarios.Split]MeshSplit

// FromMesh is one split expectation whose shares the mesh's objects
// define.
type FromMesh struct {
	Name  string
	Split *scenarios.Split
}

// FromMeshSplits are the scenario's split expectations with fromMesh, in
// file order: what a run reads from the clusters once they are connected.
func FromMeshSplits(sc *scenarios.Scenario) []FromMesh {
	var out []FromMesh
	for _, e := range Resolve(sc) {
		if k, ok := e.kind.(splitKind); ok && k.sp.FromMesh != nil {
			out = append(out, FromMesh{Name: e.Name(), Split: k.sp})
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
	ms, ok := j.mesh[sp]
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
