package cli

import (
	"encoding/json"
	"io"
)

// printJSON writes v as indented JSON: a command's --json output, the
// values as they are (for programs, not rendered for a terminal).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
