package config

//go:generate go test -run TestConfigurationReference -update .

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// sections groups the keys of docs/configuration.md: each section starts at
// the field named first and runs to the next section's first field, in the
// order of Config's fields.
var sections = []struct{ first, title string }{
	{"NodeID", "Node and data"},
	{"ClusterAddr", "Cluster"},
	{"MQTTAddr", "Listeners"},
	{"TLSCert", "TLS"},
	{"AllowAnonymous", "Client authentication"},
	{"AdminToken", "Admin API access"},
	{"LogLevel", "Logging"},
	{"Procs", "Runtime"},
	{"Fsync", "Durability"},
	{"MaxConnections", "Limits"},
	{"PlacementPolicy", "Placement of sequenced topics"},
	{"DrainTimeout", "Stopping and draining"},
	{"ReplicationTiming", "Sequenced topics"},
}

// referenceIntro opens docs/configuration.md.
const referenceIntro = `# Configuration reference

<!-- Generated from internal/config/config.go by ` + "`go test ./internal/config -update`" + `; do not edit by hand. -->

Every setting of ` + "`sextant serve`" + ` has one name, used as its command-line flag (` + "`--name`" + `), as its key in
the YAML file given with ` + "`--config FILE`" + ` (or ` + "`SEXTANT_CONFIG`" + `), and, upper-cased with ` + "`SEXTANT_`" + ` in front and
` + "`-`" + ` turned into ` + "`_`" + `, as its environment variable. Each layer overrides the one before:
defaults, then the file, then the environment, then flags given on the command line. Unknown keys in
the file are an error; an unknown ` + "`SEXTANT_`" + ` variable is logged as a warning. In the environment, lists are
comma-separated (` + "`SEXTANT_JOIN=10.0.0.1:7946,10.0.0.2:7946`" + `) and a variable set to the empty string sets an
empty value (an empty address disables that listener). Durations are Go durations: ` + "`500ms`, `10s`, `2m`" + `.

The configuration is read once at start; ` + "`Validate`" + ` rejects a setting that is out of range or contradicts
another, naming the key. Files named by the TLS, password, ACL and admin token keys are read again on
SIGHUP (see [security.md](security.md)).
`

// Reference renders docs/configuration.md from the Config struct: every
// key with its flag, environment variable, type, default and meaning. It
// fails when a field lacks any of them.
func Reference() (string, error) { return reference(reflect.TypeOf(Config{})) }

func reference(t reflect.Type) (string, error) {
	starts := map[string]string{}
	for _, s := range sections {
		if _, ok := t.FieldByName(s.first); !ok && t == reflect.TypeOf(Config{}) {
			return "", fmt.Errorf("config: reference section %q starts at unknown field %s", s.title, s.first)
		}
		starts[s.first] = s.title
	}
	var b strings.Builder
	b.WriteString(referenceIntro)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if title, ok := starts[f.Name]; ok || i == 0 {
			if !ok {
				title = "Settings"
			}
			fmt.Fprintf(&b, "\n## %s\n\n| key (YAML and `--flag`) | environment | type | default | meaning |\n|---|---|---|---|---|\n", title)
		}
		name, help := f.Tag.Get("name"), f.Tag.Get("help")
		if name == "" || name != f.Tag.Get("yaml") {
			return "", fmt.Errorf("config: field %s: name and yaml tags must be set and equal", f.Name)
		}
		if strings.TrimSpace(help) == "" {
			return "", fmt.Errorf("config: key %s has no help text: document it (the help tag) before adding it", name)
		}
		def, ok := f.Tag.Lookup("default")
		if !ok {
			return "", fmt.Errorf("config: key %s has no default tag", name)
		}
		typ, err := typeName(f)
		if err != nil {
			return "", fmt.Errorf("config: key %s: %w", name, err)
		}
		switch {
		case def == "" && f.Type.Kind() == reflect.Slice:
			def = "(none)"
		case def == "":
			def = `""`
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | `%s` | %s |\n", name, EnvName(name), typ, def, cell(help))
	}
	return b.String(), nil
}

// typeName describes a field's type for the reference.
func typeName(f reflect.StructField) (string, error) {
	if enum := f.Tag.Get("enum"); enum != "" {
		return "one of " + strings.ReplaceAll(enum, ",", ", "), nil
	}
	if f.Type == reflect.TypeOf(time.Duration(0)) {
		return "duration", nil
	}
	switch f.Type.Kind() {
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "bool", nil
	case reflect.Int, reflect.Int64:
		return "integer", nil
	case reflect.Uint16:
		return "integer (0 to 65535)", nil
	case reflect.Uint32:
		return "integer (0 to 4294967295)", nil
	case reflect.Slice:
		if f.Type.Elem().Kind() == reflect.String {
			return "list of strings", nil
		}
	}
	return "", fmt.Errorf("type %s has no reference name", f.Type)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
