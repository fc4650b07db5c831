//go:build tools

// Package tools pins the helm v3 CLI for this wrapper module.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
