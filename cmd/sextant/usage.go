package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/sextantmq/sextant/internal/config"
)

// helpValue is the help text of a flag or argument: kong's, with its
// default appended ("(default: 127.0.0.1:8088)") unless the text already
// speaks of one or the default is empty or false.
func helpValue(v *kong.Value) string {
	h := kong.DefaultHelpValueFormatter(v)
	if !v.HasDefault || v.Default == "" || v.Default == "false" || strings.Contains(strings.ToLower(v.Help), "default") {
		return h
	}
	if rest, ok := strings.CutSuffix(h, "."); ok {
		return rest + " (default: " + v.Default + ")."
	}
	return h + " (default: " + v.Default + ")"
}

// helpPrinter prints kong's help and, for a command group with a default
// command (sextant nodes runs sextant nodes list), that command's help
// too, so that the flags the bare group takes are shown with it.
func helpPrinter(opts kong.HelpOptions, ctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(opts, ctx); err != nil {
		return err
	}
	sel := ctx.Selected()
	if sel == nil || sel.DefaultCmd == nil {
		return nil
	}
	path := append(strings.Fields(sel.Path()), sel.DefaultCmd.Name)
	dctx, err := kong.Trace(ctx.Kong, path)
	if err != nil {
		return err
	}
	fmt.Fprintf(ctx.Stdout, "\n%q alone runs %q:\n\n", sel.FullPath(), sel.DefaultCmd.FullPath())
	return kong.DefaultHelpPrinter(opts, dctx)
}

// withSuggestion adds the closest flag to an unknown-flag error, when
// kong found none: kong suggests only within an edit distance of two, so
// --mqtt-port would get nothing where --mqtt-addr is meant.
func withSuggestion(err error) error {
	var pe *kong.ParseError
	if !errors.As(err, &pe) || pe.Context == nil {
		return err
	}
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "unknown flag ")
	if !ok || strings.Contains(msg, "did you mean") {
		return err
	}
	unknown := strings.TrimLeft(strings.Fields(rest)[0], "-")
	var names []string
	for _, f := range pe.Context.Flags() {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	if best := config.Suggest(unknown, names); best != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, best)
	}
	return err
}
