package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Default returns a config with every field at its `default` tag.
func Default() Config {
	var c Config
	if err := applyDefaults(reflect.ValueOf(&c).Elem()); err != nil {
		panic(err) // the tags are code: a bad one is a bug caught by the tests
	}
	return c
}

func applyDefaults(v reflect.Value) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		def, ok := f.Tag.Lookup("default")
		if !ok {
			continue
		}
		if err := setFromString(v.Field(i), def); err != nil {
			return fmt.Errorf("config: default of %s: %w", f.Name, err)
		}
	}
	return nil
}

func setFromString(v reflect.Value, s string) error {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Slice:
		if s != "" {
			return fmt.Errorf("non-empty slice default %q not supported", s)
		}
	default:
		return fmt.Errorf("unsupported kind %s", v.Kind())
	}
	return nil
}

// Load reads a YAML config file onto c (normally Default()): keys present in
// the file replace c's values; unknown keys are an error. Errors name the
// file, the line and the key, and say what form the value must take.
func Load(path string, c *Config) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	if err := Decode(f, c); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// Decode is Load from a reader. The file is a YAML mapping of keys (the
// flag names) to values; each value is decoded on its own, so that an
// error says which key it belongs to.
func Decode(r io.Reader, c *Config) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return invalid("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil // comments only
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return invalid("line %d: the file must be a mapping of key: value lines (mqtt-addr: 0.0.0.0:1883)", root.Line)
	}
	fields := map[string]int{}
	var keys []string
	t := reflect.TypeOf(*c)
	for i := 0; i < t.NumField(); i++ {
		k := t.Field(i).Tag.Get("yaml")
		fields[k] = i
		keys = append(keys, k)
	}
	v := reflect.ValueOf(c).Elem()
	seen := map[string]int{}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		key := kn.Value
		fi, ok := fields[key]
		switch {
		case !ok:
			hint := ""
			if s := Suggest(key, keys); s != "" {
				hint = fmt.Sprintf("; did you mean %s?", s)
			}
			errs = append(errs, invalid("line %d: unknown key %q%s (every key is in docs/configuration.md)", kn.Line, key, hint))
			continue
		case seen[key] != 0:
			errs = append(errs, invalid("line %d: %s is set twice (first on line %d)", kn.Line, key, seen[key]))
			continue
		}
		seen[key] = kn.Line
		if err := decodeValue(vn, v.Field(fi)); err != nil {
			errs = append(errs, invalid("line %d: %s: %s", vn.Line, key, err.Error()))
		}
	}
	return joinProblems(errs)
}

// decodeValue sets f from a YAML value node, or says what form the value
// must take.
func decodeValue(n *yaml.Node, f reflect.Value) error {
	if f.Kind() == reflect.Slice && n.Kind == yaml.ScalarNode {
		// A list may be written as one comma-separated value, as for the
		// flag and the environment variable.
		f.Set(reflect.ValueOf(splitList(n.Value)))
		return nil
	}
	if f.Kind() != reflect.Slice && n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a single value, got a %s", kindName(n.Kind))
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		if f.Kind() == reflect.String {
			f.SetString("")
			return nil
		}
		return fmt.Errorf("no value; want %s", expectedForm(f))
	}
	if f.Kind() == reflect.Slice {
		return n.Decode(f.Addr().Interface())
	}
	if err := setFromString(f, n.Value); err != nil {
		return fmt.Errorf("%q is not %s", n.Value, expectedForm(f))
	}
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}

// expectedForm says in words what a field's values look like.
func expectedForm(f reflect.Value) string {
	if f.Type() == reflect.TypeOf(time.Duration(0)) {
		return "a duration such as 10s, 250ms or 1m30s"
	}
	switch f.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<f.Type().Bits()-1)
	}
	return "a string"
}

// CopyField sets the field called name (its `name` tag) in dst to its value
// in src. The CLI uses it to lay explicitly given flags over a loaded file.
func CopyField(dst, src *Config, name string) bool {
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	t := dv.Type()
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("name") == name {
			dv.Field(i).Set(sv.Field(i))
			return true
		}
	}
	return false
}
