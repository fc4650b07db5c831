//go:build tools

// Package tools pins the helm v3 CLI for this wrapper module (CoreDNS's command is ./coredns).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
