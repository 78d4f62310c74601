// Package lint holds Sextant's dependency and style rules as ordinary tests
// (see lint_test.go). It has no production code and nothing imports it.
//
// Import rules: pure cores (the codec, topic, router, retained index,
// coords, placement, monitor, the metadata FSM, the cluster layer's routing
// table and hybrid logical clock) reach no I/O package, directly or through the
// module's packages they import; only cmd/sextant (and tests) import
// internal/node, the composition root; production code never imports a
// test harness (brokertest, clustertest, memnet, tlstest, packettest,
// mqttclienttest, clocktest). TestImportRulesCatchViolations checks that
// each rule reports a violation planted in a small graph.
//
// Style rules: every package has a doc comment, production code does not
// import "testing", tests do not sleep, fmt.Errorf wraps errors with %w,
// files stay under 1,000 lines unless they say why.
package lint
