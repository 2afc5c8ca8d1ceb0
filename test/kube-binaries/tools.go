//go:build tools

// Package tools makes this throwaway module depend on the main packages of the node and control
// plane components the test cluster runs besides kube-apiserver (scripts/kube-binaries.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
