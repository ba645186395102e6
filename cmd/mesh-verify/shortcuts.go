package main

import (
	"strconv"

	"github.com/spf13/cobra"
)

// attackShortcuts are run's --rate, --duration and --requests: the
// attack's bounds, as vegeta and k6 users expect to give them, each the
// same as --set attack.FIELD=VALUE (so validation, errors and the
// recorded scenario are --set's). They are applied after every --set, in
// this order, so a shortcut wins over a --set of the same field.
type attackShortcuts struct {
	rate, duration string
	requests       int64
}

func addAttackShortcuts(cmd *cobra.Command, s *attackShortcuts) {
	fl := cmd.Flags()
	fl.StringVar(&s.rate, "rate", "", "open-loop rate, as attack.rate: 500/s, 50/100ms (same as --set attack.rate=…)")
	fl.StringVar(&s.duration, "duration", "", "attack duration, as attack.duration: 30s, 2m (same as --set attack.duration=…)")
	fl.Int64Var(&s.requests, "requests", 0, "stop after this many requests, as attack.requests (same as --set attack.requests=…)")
}

// sets are the shortcuts given, as --set values.
func (s attackShortcuts) sets(cmd *cobra.Command) []string {
	var out []string
	fl := cmd.Flags()
	if fl.Changed("rate") {
		out = append(out, "attack.rate="+s.rate)
	}
	if fl.Changed("duration") {
		out = append(out, "attack.duration="+s.duration)
	}
	if fl.Changed("requests") {
		out = append(out, "attack.requests="+strconv.FormatInt(s.requests, 10))
	}
	return out
}
