//go:build tools

// Package tools pins the commands this wrapper module builds: Kubernetes', Kueue's and crictl.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/cri-tools/cmd/crictl"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
