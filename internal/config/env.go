package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// EnvPrefix starts the environment variable of every config key: key
// mqtt-addr is SEXTANT_MQTT_ADDR.
const EnvPrefix = "SEXTANT_"

// cliEnv are SEXTANT_ variables that are not config keys: the config file
// path of serve and the admin API credentials of the client commands.
var cliEnv = []string{"SEXTANT_CONFIG", "SEXTANT_TOKEN", "SEXTANT_CA"}

// EnvName returns the environment variable of the config key name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// FromEnv lays the SEXTANT_* variables of environ (os.Environ's "K=V"
// form) over c, each parsed as its field's type: durations as "1s", lists
// comma-separated, booleans as true/false; a variable set to the empty
// string sets an empty value (an empty address disables that listener).
// A value that does not parse is an error naming the variable. Variables
// with the prefix that name no key are returned, for the caller to warn
// about (they are usually typos).
func FromEnv(environ []string, c *Config) (unknown []string, err error) {
	byEnv := map[string]int{}
	t := reflect.TypeOf(*c)
	for i := 0; i < t.NumField(); i++ {
		byEnv[EnvName(t.Field(i).Tag.Get("name"))] = i
	}
	v := reflect.ValueOf(c).Elem()
	var errs []string
	for _, kv := range environ {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		i, known := byEnv[k]
		if !known {
			if !slices.Contains(cliEnv, k) {
				unknown = append(unknown, k)
			}
			continue
		}
		f := v.Field(i)
		if f.Kind() == reflect.Slice {
			f.Set(reflect.ValueOf(splitList(val)))
			continue
		}
		if f.Kind() != reflect.String && strings.TrimSpace(val) == "" {
			errs = append(errs, fmt.Sprintf("%s: empty", k))
			continue
		}
		if err := setFromString(f, strings.TrimSpace(val)); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not %s", k, val, expectedForm(f)))
		}
	}
	slices.Sort(unknown)
	if len(errs) > 0 {
		return unknown, invalid("environment: %s", strings.Join(errs, "; "))
	}
	return unknown, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
