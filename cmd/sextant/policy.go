package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// PolicyCmd reads and replaces the cluster's topic policy rules.
type PolicyCmd struct {
	Get PolicyGetCmd `cmd:"" help:"Print the policy rules (YAML)."`
	Set PolicySetCmd `cmd:"" help:"Replace the policy rules with those in a YAML or JSON file."`
}

// PolicyGetCmd prints the rules.
type PolicyGetCmd struct {
	AdminFlags
	JSON       bool   `name:"json" help:"Print JSON instead of YAML."`
	MinVersion uint64 `name:"min-version" help:"Wait until the node has this policy version (the one policy set printed) before printing: a node other than the one written through may be a moment behind." placeholder:"N"`
}

func (c *PolicyGetCmd) Run(e *env) error {
	ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
	defer cancel()
	cl, err := c.client()
	if err != nil {
		return err
	}
	var ps adminapi.PolicySet
	if c.MinVersion > 0 {
		ps, err = cl.PoliciesAt(ctx, c.MinVersion)
	} else {
		ps, err = cl.Policies(ctx)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ps)
	}
	return printYAML(e, ps)
}

// policyFile is the file format of `policy set`: the rules, as the API's
// JSON field names, in YAML or JSON. The version that `policy get` prints
// is accepted and ignored, so that its output restores as it is (a backup);
// --expect-version is the compare-and-swap.
type policyFile struct {
	Rules   []fsm.Rule `json:"rules" yaml:"rules"`
	Version *uint64    `json:"version,omitempty" yaml:"version,omitempty"`
}

// PolicySetCmd replaces the rules.
type PolicySetCmd struct {
	AdminFlags
	File          string  `name:"file" short:"f" required:"" type:"existingfile" help:"YAML or JSON file with a top-level 'rules' list." placeholder:"FILE"`
	ExpectVersion *uint64 `name:"expect-version" help:"Only replace if the current policy version is this (compare-and-swap)."`
}

func (c *PolicySetCmd) Run(e *env) error {
	data, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	pf, err := decodePolicyFile(data)
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	cl, err := c.client()
	if err != nil {
		return err
	}
	ps, err := cl.PutPolicies(ctx, pf.Rules, c.ExpectVersion)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "policy version %d: %d rules (other nodes apply it within moments; "+
		"sextant policy get --min-version %d --admin OTHER waits for it there)\n", ps.Version, len(ps.Rules), ps.Version)
	return nil
}

// ruleFields are the keys of a rule, as the API names them.
var ruleFields = []string{"match", "mode", "latency_ms", "replicas", "spread", "group", "retention"}

// decodePolicyFile reads a policy file (YAML, or JSON, which YAML
// includes): a mapping with a rules list and optionally a version. Every
// error names the field, as rules[2].latency_ms, and says what it wants.
func decodePolicyFile(data []byte) (policyFile, error) {
	var pf policyFile
	var top any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return pf, err
	}
	m, ok := top.(map[string]any)
	if !ok {
		return pf, errors.New("want a mapping with a rules list (see docs/policy.md)")
	}
	for k := range m {
		if k != "rules" && k != "version" {
			return pf, fmt.Errorf("unknown field %q (want rules, and optionally the version policy get prints)", k)
		}
	}
	if v, ok := m["version"]; ok {
		n, ok := v.(int)
		if !ok || n < 0 {
			return pf, errors.New("version: want a whole number")
		}
		u := uint64(n)
		pf.Version = &u
	}
	list, ok := m["rules"].([]any)
	if !ok && m["rules"] != nil {
		return pf, errors.New("rules: want a list of rules")
	}
	pf.Rules = []fsm.Rule{}
	for i, item := range list {
		field := fmt.Sprintf("rules[%d]", i)
		rm, ok := item.(map[string]any)
		if !ok {
			return pf, fmt.Errorf("%s: want a rule (match: FILTER, mode: direct|sequenced, ...)", field)
		}
		for k := range rm {
			if !slices.Contains(ruleFields, k) {
				hint := ""
				if s := config.Suggest(k, ruleFields); s != "" {
					hint = "; did you mean " + s + "?"
				}
				return pf, fmt.Errorf("%s: unknown field %q%s (fields: %s; see docs/policy.md)", field, k, hint, strings.Join(ruleFields, ", "))
			}
		}
		if err := checkRetention(field+".retention", rm["retention"]); err != nil {
			return pf, err
		}
		js, err := json.Marshal(rm)
		if err != nil {
			return pf, fmt.Errorf("%s: %w", field, err)
		}
		var r fsm.Rule
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return pf, fmt.Errorf("%s.%s: want %s, got a %s", field, te.Field, jsonKind(te.Type.Kind()), te.Value)
			}
			return pf, fmt.Errorf("%s: %w", field, err)
		}
		pf.Rules = append(pf.Rules, r)
	}
	return pf, nil
}

// checkRetention checks a rule's retention (nil: none) field by field.
func checkRetention(field string, v any) error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want a mapping with messages, duration or both", field)
	}
	for k, x := range m {
		switch k {
		case "messages":
			if _, ok := x.(int); !ok {
				return fmt.Errorf("%s.messages: want a whole number", field)
			}
		case "duration":
			d, ok := x.(string)
			if _, err := time.ParseDuration(d); !ok || err != nil {
				return fmt.Errorf("%s.duration: want a duration such as 36h or 90m, got %v", field, x)
			}
		default:
			return fmt.Errorf("%s: unknown field %q (fields: messages, duration)", field, k)
		}
	}
	return nil
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Int32, reflect.Uint32:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "a string"
}

func printYAML(e *env, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return err
	}
	enc := yaml.NewEncoder(e.stdout)
	enc.SetIndent(2)
	defer enc.Close()
	return enc.Encode(generic)
}
