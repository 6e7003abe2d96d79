package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newWriteCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:     "write AGENT PATH < FILE",
		Short:   "Replace a file in an agent's sandbox with standard input (atomic, creates directories)",
		Example: "  toolgate write demo notes/a.txt < a.txt",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The content streams as the request body, its size and SHA-256
			// stated first: memory stays constant whatever the file's size.
			in, size, sum, done, err := seekableInput(os.Stdin)
			if err != nil {
				return err
			}
			defer done()
			c, err := g.Dial()
			if err != nil {
				return err
			}
			call := map[string]any{"path": args[1], "size": size, "sha256": hex.EncodeToString(sum)}
			res, err := c.CallRaw(cmd.Context(), args[0], "write", call, in, size)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %v bytes to %v\n", output(res, "bytes"), output(res, "path"))
			return nil
		},
	}
}

// seekableInput returns f's content from where it stands, with its size and
// SHA-256. A pipe is first copied to a temporary file (removed by done), so
// the size and digest can go before the bytes.
func seekableInput(f *os.File) (r io.Reader, size int64, sum []byte, done func(), err error) {
	done = func() {}
	if st, serr := f.Stat(); serr != nil || !st.Mode().IsRegular() {
		tmp, err := os.CreateTemp("", "toolgate-write-*")
		if err != nil {
			return nil, 0, nil, done, fmt.Errorf("standard input is not a file, and keeping it in a temporary file failed: %w", err)
		}
		done = func() { tmp.Close(); os.Remove(tmp.Name()) }
		if _, err := io.Copy(tmp, f); err != nil {
			return nil, 0, nil, done, fmt.Errorf("reading standard input: %w", err)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return nil, 0, nil, done, err
		}
		f = tmp
	}
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, nil, done, err
	}
	h := sha256.New()
	if size, err = io.Copy(h, f); err != nil {
		return nil, 0, nil, done, fmt.Errorf("reading standard input: %w", err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return nil, 0, nil, done, err
	}
	return io.LimitReader(f, size), size, h.Sum(nil), done, nil
}
