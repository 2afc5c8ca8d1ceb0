//go:build tools

// Package tools makes this throwaway module depend on flannel's main package, so that
// scripts/flannel.sh can build the flanneld of the flannel install variant from the Go module proxy.
package tools

import _ "github.com/flannel-io/flannel"
