package config

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the config struct")

const referencePath = "../../docs/configuration.md"

// TestConfigurationReference keeps docs/configuration.md equal to what the
// config struct generates (run with -update to rewrite it).
func TestConfigurationReference(t *testing.T) {
	want, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(referencePath)
	if err != nil && !*update {
		t.Fatal(err)
	}
	if string(have) == want {
		return
	}
	if *update {
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("docs/configuration.md is stale: run go test ./internal/config -update")
}

// Every key appears in the reference with its flag, variable, type and
// default.
func TestReferenceListsEveryKey(t *testing.T) {
	ref, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Tag.Get("name")
		row := "| `" + name + "` | `" + EnvName(name) + "` | "
		if !strings.Contains(ref, row) {
			t.Errorf("reference lacks a row for %s", name)
		}
	}
}

// A key added without its documentation makes the reference, and so this
// package's tests, fail.
func TestUndocumentedKeyFails(t *testing.T) {
	type withUndocumented struct {
		Documented   string        `name:"documented" yaml:"documented" default:"x" help:"Has a meaning."`
		Undocumented time.Duration `name:"undocumented" yaml:"undocumented" default:"1s"`
	}
	_, err := reference(reflect.TypeOf(withUndocumented{}))
	if err == nil || !strings.Contains(err.Error(), "undocumented") {
		t.Fatalf("a key without help was accepted: %v", err)
	}
	type noDefault struct {
		K string `name:"k" yaml:"k" help:"Meaning."`
	}
	if _, err := reference(reflect.TypeOf(noDefault{})); err == nil {
		t.Fatal("a key without a default was accepted")
	}
	type oddType struct {
		K float64 `name:"k" yaml:"k" default:"1" help:"Meaning."`
	}
	if _, err := reference(reflect.TypeOf(oddType{})); err == nil {
		t.Fatal("a key of an undescribed type was accepted")
	}
}
