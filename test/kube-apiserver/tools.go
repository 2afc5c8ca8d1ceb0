//go:build tools

// Package tools makes this throwaway module depend on kube-apiserver's main package, so that
// scripts/kube-apiserver.sh can build it from the Go module proxy (the tests' real API server).
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
