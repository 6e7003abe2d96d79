package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// Docs renders the CLI reference: one Markdown page per command, named by
// its path (toolgate_hooks_install.md), from the command tree root (the
// whole tree is toolgate-gateway's: gatewaycmd.NewRootCmd).
// cobra/doc would do it but brings a man-page renderer and a YAML library.
func Docs(root *cobra.Command) map[string][]byte {
	pages := map[string][]byte{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		pages[docName(c)] = docPage(c)
		for _, s := range c.Commands() {
			if documented(s) {
				walk(s)
			}
		}
	}
	walk(root)
	return pages
}

// WriteDocs replaces the Markdown pages in dir with Docs(root): a page of a
// command that no longer exists is removed.
func WriteDocs(dir string, root *cobra.Command) error {
	pages := Docs(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "toolgate*.md"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, ok := pages[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for name, b := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func documented(c *cobra.Command) bool {
	return c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand()
}

func docName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

func docPage(c *cobra.Command) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", c.CommandPath(), c.Short)
	if c.Long != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(c.Long))
	}
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "## Examples\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if f := c.NonInheritedFlags(); f.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Options\n\n```\n%s```\n\n", f.FlagUsages())
	}
	if f := c.InheritedFlags(); f.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Options inherited from parent commands\n\n```\n%s```\n\n", f.FlagUsages())
	}
	var subs []*cobra.Command
	for _, s := range c.Commands() {
		if documented(s) {
			subs = append(subs, s)
		}
	}
	if len(subs) > 0 {
		b.WriteString("## Commands\n\n")
		for _, s := range subs {
			fmt.Fprintf(&b, "* [%s](%s) — %s\n", s.CommandPath(), docName(s), s.Short)
		}
		b.WriteString("\n")
	}
	if p := c.Parent(); p != nil {
		fmt.Fprintf(&b, "See also [%s](%s).\n", p.CommandPath(), docName(p))
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}
