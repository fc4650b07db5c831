//go:build tools

// Package tools pins the Kueue controller manager (sigs.k8s.io/kueue/cmd/kueue) for this wrapper module.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
