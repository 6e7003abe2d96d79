package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// envFlags are exec's environment flags, shared by `exec` and `run`.
type envFlags struct{ env, secretEnv []string }

func (f *envFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.env, "env", "e", nil, "environment NAME=VALUE (repeatable; recorded in the audit log as given)")
	cmd.Flags().StringArrayVar(&f.secretEnv, "secret-env", nil,
		"environment NAME=SECRET from the gateway's host secrets (repeatable; the secret must list the agent and tool exec; the audit log keeps only its name)")
}

// apply puts the flags into an exec call's arguments.
func (f *envFlags) apply(cmd *cobra.Command, call map[string]any) error {
	for _, set := range []struct {
		flags []string
		key   string
		want  string
	}{{f.env, "env", "--env wants NAME=VALUE, got "}, {f.secretEnv, "secretEnv", "--secret-env wants NAME=SECRET, got "}} {
		if len(set.flags) == 0 {
			continue
		}
		m := map[string]string{}
		for _, kv := range set.flags {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return UsageErr(cmd, set.want+kv)
			}
			m[k] = v
		}
		call[set.key] = m
	}
	return nil
}
