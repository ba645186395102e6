#!/usr/bin/env bash
# Regenerates lab/crds/istio.yaml: the CustomResourceDefinitions of the Istio kinds the lab's
# topologies apply (VirtualService, DestinationRule, Gateway), cut unchanged out of
# kubernetes/customresourcedefinitions.gen.yaml of the Go module istio.io/api at $ISTIO_API
# (default v1.32.0). Only this tool downloads the module; the product never imports it.
# The Kuma and Skupper CRDs (lab/crds/kuma.yaml, skupper.yaml) are committed excerpts of the
# upstream files named in their headers (the module proxy does not serve those modules).
#
#   tools/lab/crds.sh            # rewrite lab/crds/istio.yaml
#   tools/lab/crds.sh --check    # fail when the committed file differs from a fresh cut
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="${ISTIO_API:-v1.32.0}"
out="$root/lab/crds/istio.yaml"
kinds=(destinationrules.networking.istio.io gateways.networking.istio.io virtualservices.networking.istio.io)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
dir="$(cd "$tmp" && GOFLAGS=-mod=mod GOWORK=off go mod download -json "istio.io/api@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
src="$dir/kubernetes/customresourcedefinitions.gen.yaml"
[[ -r "$src" ]] || { echo "crds.sh: $src not found in istio.io/api@$version" >&2; exit 1; }

{
  echo "# Istio CustomResourceDefinitions served by every lab cluster's API server."
  echo "# Cut unchanged by tools/lab/crds.sh from the Go module istio.io/api@$version,"
  echo "# kubernetes/customresourcedefinitions.gen.yaml (https://github.com/istio/api/blob/$version/kubernetes/customresourcedefinitions.gen.yaml):"
  echo "# the documents named ${kinds[*]}."
  # One document per "---"; keep those whose metadata.name is one of the kinds.
  awk -v want="${kinds[*]}" '
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
    function flush() { if (doc != "" && name in keep) { printf "---\n%s", doc } doc = ""; name = "" }
    /^---[[:space:]]*$/ { flush(); next }
    { doc = doc $0 "\n" }
    /^  name: / && name == "" && inmeta { name = $2 }
    /^metadata:/ { inmeta = 1; next }
    /^[^ ]/ { inmeta = 0 }
    END { flush() }
  ' "$src"
} >"$tmp/istio.yaml"

got="$(grep -c '^kind: CustomResourceDefinition' "$tmp/istio.yaml" || true)"
[[ "$got" == "${#kinds[@]}" ]] || { echo "crds.sh: cut $got CRDs, want ${#kinds[@]}" >&2; exit 1; }
if [[ "${1:-}" == --check ]]; then
  cmp -s "$tmp/istio.yaml" "$out" || { echo "crds.sh: $out differs from istio.io/api@$version; run tools/lab/crds.sh" >&2; exit 1; }
  exit 0
fi
cp "$tmp/istio.yaml" "$out"
echo "$out: ${kinds[*]} from istio.io/api@$version" >&2
