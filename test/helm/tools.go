//go:build tools

// Package tools makes this throwaway module depend on helm's main package, so that
// scripts/helm.sh can build the helm the chart tests drive from the Go module proxy.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
