package gatewaycmd

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
)

// toolgate's tree lists the same commands with the same help as
// toolgate-gateway's: its stand-ins for the commands here name them and
// nothing else, and they parse nothing of their own.
func TestThinTreeListsEveryCommand(t *testing.T) {
	short := func(root *cobra.Command) map[string]string {
		m := map[string]string{}
		for _, c := range root.Commands() {
			m[c.Name()] = c.Short
		}
		return m
	}
	thin, full := cli.NewRootCmd(), NewRootCmd()
	want, got := short(full), short(thin)
	for name, s := range want {
		if got[name] != s {
			t.Errorf("toolgate lists %s as %q, toolgate-gateway as %q", name, got[name], s)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("toolgate lists %s, which toolgate-gateway does not have", name)
		}
	}
	ours := map[string]bool{}
	for _, c := range commands(&cli.Globals{}) {
		ours[c.Name()] = true
	}
	for _, c := range thin.Commands() {
		if c.DisableFlagParsing != ours[c.Name()] {
			t.Errorf("toolgate's %s: stands in for toolgate-gateway = %v, is a gatewaycmd command = %v", c.Name(), c.DisableFlagParsing, ours[c.Name()])
		}
	}
}
