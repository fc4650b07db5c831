//go:build tools

// Package tools pins crictl for this wrapper module.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
