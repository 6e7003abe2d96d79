package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func newReadCmd(g *Globals) *cobra.Command {
	var offset, limit int
	var raw bool
	cmd := &cobra.Command{
		Use:   "read AGENT PATH",
		Short: "Print a file from an agent's sandbox (relative paths are in the workspace)",
		Args:  Words(2, 2, "AGENT PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if offset < 0 || limit < 0 {
				return UsageErr(cmd, fmt.Sprintf("--offset %d --limit %d: lines are counted from 1", offset, limit))
			}
			call := map[string]any{"path": args[1]}
			if offset > 0 {
				call["offset"] = offset
			}
			if limit > 0 {
				call["limit"] = limit
			}
			if raw {
				// Bytes as they come, straight to stdout: memory stays
				// constant whatever the file's size.
				call["encoding"] = "raw"
				c, err := g.Dial()
				if err != nil {
					return err
				}
				_, err = c.CallRawOut(cmd.Context(), args[0], "read", call, os.Stdout)
				return err
			}
			res, err := callTool(cmd, g, args[0], "read", call)
			if err != nil {
				return cliHint(err)
			}
			content, _ := output(res, "content").(string)
			fmt.Print(content)
			return cutShort(res)
		},
	}
	cmd.Flags().IntVar(&offset, "offset", 0, "first line to print (1-based)")
	cmd.Flags().IntVar(&limit, "limit", 0, "number of lines to print")
	cmd.Flags().BoolVar(&raw, "binary", false, "read bytes as they are (binary files)")
	return cmd
}

// cutShort is the error of a text read the read cap cut before the lines
// asked for ended: what was printed is the head of the file, and a script
// must not take it for the whole (exit 125). A window that ended within
// the kept part (--limit) is whole, whatever the file's size.
func cutShort(res *api.Result) error {
	if t, _ := output(res, "truncated").(bool); !t {
		return nil
	}
	lines, _ := output(res, "lines").(map[string]any)
	to, total := fmt.Sprint(lines["to"]), fmt.Sprint(lines["total"])
	if to != total {
		return nil
	}
	return fmt.Errorf("the file is %v bytes, over the read cap (limits.maxReadFile): printed lines %v–%v of the part the cap keeps, and lines past it cannot be read", output(res, "size"), lines["from"], to)
}

// apiBinaryHint is coretools.BinaryHint (a test keeps them equal; the CLI
// does not link the tools): the API's field, which a person at the CLI
// spells --binary.
const apiBinaryHint = `read it with "encoding":"base64"`

// cliHint names the CLI's flag where the daemon's error names the API's field.
func cliHint(err error) error {
	var e *api.Error
	if errors.As(err, &e) && strings.Contains(e.Message, apiBinaryHint) {
		c := *e
		c.Message = strings.Replace(c.Message, apiBinaryHint, "read it with --binary", 1)
		return &c
	}
	return err
}
