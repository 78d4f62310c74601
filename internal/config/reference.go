package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Reference renders every config field as a Markdown table: the flag (and
// YAML key), its default and what it does. The README embeds it, and a test
// keeps the two equal.
func Reference() string {
	var b strings.Builder
	b.WriteString("| flag / YAML key | default | meaning |\n|---|---|---|\n")
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		def := f.Tag.Get("default")
		switch {
		case def == "" && f.Type.Kind() == reflect.Slice:
			def = "(none)"
		case def == "":
			def = `""`
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s |\n", f.Tag.Get("name"), def, strings.ReplaceAll(f.Tag.Get("help"), "|", "\\|"))
	}
	return b.String()
}
