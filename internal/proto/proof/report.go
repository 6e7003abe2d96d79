package proof

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// KeyArg reads the verifier keys a person gives: a key itself
// (name+hash+key, as `toolgate id` prints it) or a file holding keys, one
// a line.
func KeyArg(arg string) ([]note.Verifier, error) {
	if v, err := note.NewVerifier(strings.TrimSpace(arg)); err == nil {
		return []note.Verifier{v}, nil
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("%q is neither a verifier key nor a file of them: %v", clip(arg), err)
	}
	return NoteKeys(b)
}

// KeyArgs is KeyArg of each of args, in order: a repeated --key flag.
func KeyArgs(args []string) ([]note.Verifier, error) {
	var out []note.Verifier
	for _, arg := range args {
		vs, err := KeyArg(arg)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// Report prints the outcome of Verify as a person reads it: what a valid
// receipt proves, or each reason an invalid one is not; it returns err.
func Report(w io.Writer, v *Verified, err error) error {
	var bad *InvalidError
	switch {
	case errors.As(err, &bad):
		fmt.Fprintf(w, "invalid: %d problem(s)\n", len(bad.Problems)+bad.More)
		for _, p := range bad.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		if bad.More > 0 {
			fmt.Fprintf(w, "  … and %d more\n", bad.More)
		}
	case err != nil:
	default:
		fmt.Fprintf(w, "valid: %d entries of %s are leaves of %s's log, in its tree of %d entries signed by %s",
			v.Entries, v.Selection, v.Checkpoint.Origin, v.Checkpoint.Size, v.SignedBy)
		if v.Witnesses > 0 {
			fmt.Fprintf(w, " and cosigned by %d witness(es)", v.Witnesses)
		}
		fmt.Fprintln(w, "; the manifest lists every one.")
	}
	return err
}

// String is the selection as a person reads it.
func (s Selection) String() string {
	var parts []string
	for _, f := range []struct{ name, v string }{{"agent", s.Agent}, {"session", s.Session}, {"call", s.Call}, {"since", s.Since}} {
		if f.v != "" {
			parts = append(parts, f.name+" "+f.v)
		}
	}
	return strings.Join(parts, ", ")
}
