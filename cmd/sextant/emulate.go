package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/emu"
)

// EmulateCmd groups the geo emulator's commands.
type EmulateCmd struct {
	Policies EmulatePoliciesCmd `cmd:"" help:"Compare topic placement policies on real latency data and write tables and SVG charts."`
}

// EmulatePoliciesCmd reproduces ePulsar's policy evaluation (Sections
// 5.5-5.6): coordinates from Vivaldi over a latency dataset, the paper's
// workloads, each policy's choice scored against the true latencies.
type EmulatePoliciesCmd struct {
	Scenario      string `help:"Scenario: mmog, mmog-multi, uav, monitoring or all." enum:"mmog,mmog-multi,uav,monitoring,all" default:"all"`
	Out           string `help:"Folder for the tables (.md, .csv) and charts (.svg)." default:"./emulate-out"`
	Permutations  int    `help:"Random workloads per point." default:"1000"`
	Topologies    int    `help:"MMOG: random city sets (each with its own Vivaldi run) per point." default:"50"`
	Seed          uint64 `help:"Seed for every random choice; the same seed gives the same results." default:"1"`
	Dataset       string `help:"UAV: base-station sites, melbourne (real) or atlanta (synthetic)." enum:"melbourne,atlanta" default:"melbourne"`
	VivaldiRounds int    `help:"Vivaldi gossip rounds (each node probes one random peer per round)." default:"600"`
	Workers       int    `help:"Worker goroutines; 0 means one per CPU." default:"0"`
}

// Validate rejects values kong's types cannot.
func (c *EmulatePoliciesCmd) Validate() error {
	switch {
	case c.Permutations < 1:
		return errors.New("--permutations must be at least 1")
	case c.Topologies < 1:
		return errors.New("--topologies must be at least 1")
	case c.VivaldiRounds < 1:
		return errors.New("--vivaldi-rounds must be at least 1")
	case c.Workers < 0:
		return errors.New("--workers must not be negative")
	}
	return nil
}

func (c *EmulatePoliciesCmd) Run(e *env) error {
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return fmt.Errorf("emulate: %w", err)
	}
	opt := emu.Options{
		Permutations: c.Permutations, Topologies: c.Topologies, Seed: c.Seed, Workers: c.Workers, Sites: c.Dataset,
		Vivaldi:  emu.VivaldiConfig{Rounds: c.VivaldiRounds, Jitter: 0.05},
		Progress: progress(e),
	}
	fmt.Fprintf(e.stderr, "emulate: seed %d, %d permutations per point, output in %s\n", c.Seed, c.Permutations, c.Out)
	scenarios := []string{c.Scenario}
	if c.Scenario == "all" {
		scenarios = []string{"mmog", "mmog-multi", "uav", "monitoring"}
	}
	var report strings.Builder
	report.WriteString("# Placement policy evaluation\n\n")
	fmt.Fprintf(&report, "Command: `sextant emulate policies %s`\n\n", strings.Join(c.args(), " "))
	for _, sc := range scenarios {
		start := time.Now()
		files, summary, err := c.runScenario(e, sc, opt)
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(c.Out, f.Name), f.Data, 0o644); err != nil {
				return fmt.Errorf("emulate: %w", err)
			}
		}
		report.Write(files[0].Data)
		fmt.Fprintf(e.stdout, "%s\n", summary)
		fmt.Fprintf(e.stderr, "emulate: %s done in %s\n", sc, time.Since(start).Round(100*time.Millisecond))
	}
	if len(scenarios) > 1 {
		if err := os.WriteFile(filepath.Join(c.Out, "README.md"), []byte(report.String()), 0o644); err != nil {
			return fmt.Errorf("emulate: %w", err)
		}
	}
	fmt.Fprintf(e.stdout, "tables and charts written to %s\n", c.Out)
	return nil
}

func (c *EmulatePoliciesCmd) runScenario(e *env, scenario string, opt emu.Options) ([]emu.File, string, error) {
	switch scenario {
	case "monitoring":
		r, err := emu.RunMonitoring(opt)
		if err != nil {
			return nil, "", err
		}
		return r.Files(), r.Markdown(), nil
	case "uav":
		r, err := emu.RunUAV(e.ctx, opt)
		if err != nil {
			return nil, "", err
		}
		return r.Files(), r.Summary(), nil
	default:
		r, err := emu.RunMMOG(e.ctx, opt, scenario == "mmog-multi")
		if err != nil {
			return nil, "", err
		}
		return r.Files(), r.Summary(), nil
	}
}

// args are the flags that reproduce this run.
func (c *EmulatePoliciesCmd) args() []string {
	return []string{
		"--scenario", c.Scenario, "--permutations", fmt.Sprint(c.Permutations), "--topologies", fmt.Sprint(c.Topologies),
		"--seed", fmt.Sprint(c.Seed), "--dataset", c.Dataset, "--vivaldi-rounds", fmt.Sprint(c.VivaldiRounds),
	}
}

// progress prints a line on stderr each time a scenario passes another 10%.
func progress(e *env) func(scenario, point string, done, total int) {
	last := map[string]int{}
	return func(scenario, point string, done, total int) {
		tenth := done * 10 / total
		if tenth > last[scenario] {
			last[scenario] = tenth
			fmt.Fprintf(e.stderr, "emulate: %s %3d%% (%d/%d permutations, at %s)\n", scenario, tenth*10, done, total, point)
		}
	}
}
