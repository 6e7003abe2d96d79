package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/coretools"
	"github.com/toolgate/toolgate/internal/wire"
)

// TestReadBinaryHintNamesTheFlag: a text read of a binary file tells a
// person at the CLI to pass --binary, not the API's "encoding":"base64".
func TestReadBinaryHintNamesTheFlag(t *testing.T) {
	if apiBinaryHint != coretools.BinaryHint {
		t.Fatalf("apiBinaryHint %q differs from coretools.BinaryHint %q", apiBinaryHint, coretools.BinaryHint)
	}
	daemon := &wire.Error{Code: "tool_error", Message: "read /workspace/a.bin: binary file (NUL byte at offset 2); " + coretools.BinaryHint, ID: "c-1"}
	got := cliHint(fmt.Errorf("call: %w", daemon)).Error()
	if !strings.Contains(got, "read it with --binary") || strings.Contains(got, "encoding") {
		t.Errorf("CLI error %q, want it to name --binary and not the API field", got)
	}
	if !strings.Contains(got, "NUL byte at offset 2") || !strings.Contains(daemon.Message, "encoding") {
		t.Errorf("CLI error %q lost the daemon's words, or the daemon's error was changed", got)
	}
	other := &wire.Error{Code: "denied", Message: "no"}
	if cliHint(other) != error(other) {
		t.Error("an unrelated error was rewritten")
	}
}
