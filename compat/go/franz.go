//go:build tools

// Package compat pins franz-go so that `go mod tidy` keeps it: scripts/compat runs
// franz-go's own integration tests (`go test github.com/twmb/franz-go/pkg/kgo`) from
// this module against the broker under test.
package compat

import (
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kgo"
)
