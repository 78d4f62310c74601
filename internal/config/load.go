package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
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
// the file replace c's values; unknown keys are an error.
func Load(path string, c *Config) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return Decode(f, c)
}

// Decode is Load from a reader.
func Decode(r io.Reader, c *Config) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config: %w", err)
	}
	return nil
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
