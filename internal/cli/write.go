package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newWriteCmd(g *Globals) *cobra.Command {
	var sum string
	cmd := &cobra.Command{
		Use:   "write AGENT PATH < FILE",
		Short: "Replace a file in an agent's sandbox with standard input (atomic, creates directories)",
		Long: `Replace a file in an agent's sandbox with standard input: atomically (readers see the old
file or the new one), creating directories. The content streams as it is read; the gateway
computes its SHA-256 on the way, records it in the audit and prints it. With --sha256 the
content must have that digest, or the file is left as it was.`,
		Example: "  toolgate write demo notes/a.txt < a.txt\n  toolgate write demo big.bin --sha256 $(sha256sum < big.bin | cut -c1-64) < big.bin",
		Args:    Words(2, 2, "AGENT PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The content streams as the request body, its size stated
			// first: memory stays constant whatever the file's size.
			in, size, done, err := sizedInput(os.Stdin)
			if err != nil {
				return err
			}
			defer done()
			c, err := g.Dial()
			if err != nil {
				return err
			}
			call := map[string]any{"path": args[1], "size": size}
			if sum != "" {
				call["sha256"] = strings.ToLower(sum) // as sha256sum prints it, in either case
			}
			res, err := c.CallRaw(cmd.Context(), args[0], "write", call, in, size)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %v bytes to %v (sha256 %v)\n", output(res, "bytes"), output(res, "path"), output(res, "sha256"))
			return nil
		},
	}
	cmd.Flags().StringVar(&sum, "sha256", "", "the content's SHA-256 in hex, checked by the gateway before the file is replaced")
	return cmd
}

// sizedInput returns f's content from where it stands, with its size. A
// pipe is first copied to a temporary file (removed by done), so the size
// can go before the bytes.
func sizedInput(f *os.File) (r io.Reader, size int64, done func(), err error) {
	done = func() {}
	if st, serr := f.Stat(); serr != nil || !st.Mode().IsRegular() {
		tmp, err := os.CreateTemp("", "toolgate-write-*")
		if err != nil {
			return nil, 0, done, fmt.Errorf("standard input is not a file, and keeping it in a temporary file failed: %w", err)
		}
		done = func() { tmp.Close(); os.Remove(tmp.Name()) }
		if _, err := io.Copy(tmp, f); err != nil {
			return nil, 0, done, fmt.Errorf("reading standard input: %w", err)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return nil, 0, done, err
		}
		f = tmp
	}
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, done, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, 0, done, err
	}
	size = max(st.Size()-start, 0)
	// A file that shrinks meanwhile ends the body early, one that grows is
	// cut at size: either way the gateway sees the stated size or refuses.
	return io.LimitReader(f, size), size, done, nil
}
