// Package lint holds Sextant's dependency and style rules as ordinary tests
// (see lint_test.go). It has no production code and nothing imports it.
package lint
