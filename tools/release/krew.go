package main

import (
	"fmt"
	"os"
	"strings"
	"text/template"
)

// krewPluginName is the plugin's name in krew's index: `kubectl krew
// install mesh-verify`, then `kubectl mesh-verify run …`. krew requires the
// manifest's file name to be the plugin name.
const krewPluginName = "mesh-verify"

type krewPlatform struct {
	p                    platform
	archive, sha256, bin string
}

// krewManifest follows krew's plugin manifest format
// (krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/); the test
// checks it with krew's own validate-krew-manifest.
var krewManifest = template.Must(template.New("krew").Parse(`apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: {{.Name}}
spec:
  version: {{.Version}}
  homepage: https://github.com/{{.Repo}}
  shortDescription: Verify where a multi-cluster service mesh sends traffic
  description: |
    mesh-verify attacks a service mesh's entry point at a controlled rate,
    works out which cluster, pod and version served each request (response
    bodies, pod logs from every cluster, per-pod metrics), checks the
    observed split against the expected one (mirroring, weights, link
    costs, per-cluster balancing, failover) with sound statistics and
    reports a verdict a CI gate can trust. Istio, Skupper, Cilium Cluster
    Mesh and Kuma multi-zone.
  caveats: |
    mesh-verify reads pods, logs and services in the clusters it checks;
    ` + "`kubectl mesh-verify rbac SCENARIO`" + ` prints the Role it needs.
  platforms:
{{- range .Platforms}}
  - selector:
      matchLabels:
        os: {{.OS}}
        arch: {{.Arch}}
    uri: https://github.com/{{$.Repo}}/releases/download/{{$.Version}}/{{.Archive}}
    sha256: {{.SHA256}}
    bin: {{.Bin}}
    files:
    - from: {{.Bin}}
      to: .
    - from: LICENSE
      to: .
{{- end}}
`))

func writeKrewManifest(path, repo, version string, ps []krewPlatform) error {
	type row struct{ OS, Arch, Archive, SHA256, Bin string }
	data := struct {
		Name, Repo, Version string
		Platforms           []row
	}{krewPluginName, repo, version, nil}
	for _, p := range ps {
		data.Platforms = append(data.Platforms, row{p.p.os, p.p.arch, p.archive, p.sha256, p.bin})
	}
	var b strings.Builder
	if err := krewManifest.Execute(&b, data); err != nil {
		return fmt.Errorf("krew manifest: %w", err)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
