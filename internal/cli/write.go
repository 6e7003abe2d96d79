package cli

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

func newWriteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "write AGENT PATH < FILE",
		Short:   "Replace a file in an agent's sandbox with standard input (atomic, creates directories)",
		Example: "  toolgate write demo notes/a.txt < a.txt",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := io.ReadAll(os.Stdin)
			if err != nil {
				return err
			}
			call := map[string]any{"path": args[1], "content": string(b)}
			if !utf8.Valid(b) {
				call["content"], call["encoding"] = base64.StdEncoding.EncodeToString(b), "base64"
			}
			res, err := callTool(cmd, g, args[0], "write", call, false)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %v bytes to %v\n", output(res, "bytes"), output(res, "path"))
			return nil
		},
	}
}
