// Package config owns the node's configuration: one typed struct, Config,
// whose fields carry their flag/YAML name, default and help text in struct
// tags, so that `sextant serve` flags and the YAML config file map onto the
// same fields by the same names. Default() applies the default tags;
// Validate() checks a whole config; Load reads a YAML file strictly (unknown
// keys are errors); FromEnv lays SEXTANT_* environment variables over it,
// typed. Reference renders docs/configuration.md from the tags (a test keeps
// the file current: go generate ./internal/config rewrites it), and fails
// for a key without help text.
//
// The package does no I/O other than reading the file handed to Load. A
// config is built once, validated and handed to internal/node; it does not
// change at run time, but the files it names for TLS, passwords, the ACL and
// the admin token are read again when the node reloads (SIGHUP).
package config
