//go:build tools

// Package tools pins etcdctl (built from its own module) for this wrapper module.
package tools

import _ "go.etcd.io/etcd/etcdctl/v3"
