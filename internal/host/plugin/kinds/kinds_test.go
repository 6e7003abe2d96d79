package kinds

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/host/plugin"
)

func TestEveryKindRegistered(t *testing.T) {
	if got, want := plugin.Kinds(), []string{"builtin", "command", "mcp"}; !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
}
