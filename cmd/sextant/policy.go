package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

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
	JSON bool `name:"json" help:"Print JSON instead of YAML."`
}

func (c *PolicyGetCmd) Run(e *env) error {
	ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
	defer cancel()
	cl, err := c.client()
	if err != nil {
		return err
	}
	ps, err := cl.Policies(ctx)
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
	// YAML is a superset of JSON; decode to generic data, then through
	// JSON so the rule fields use the API's names and types.
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	js, err := json.Marshal(generic)
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	var pf policyFile
	dec := json.NewDecoder(bytesReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pf); err != nil {
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
	fmt.Fprintf(e.stdout, "policy version %d: %d rules\n", ps.Version, len(ps.Rules))
	return nil
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

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
