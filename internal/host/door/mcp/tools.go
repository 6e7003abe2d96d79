package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Schemer is a tool that publishes the JSON Schema of its arguments (the
// core tools do). A tool without one is offered with an open object schema.
type Schemer interface{ Schema() string }

// Describer is a tool with a description for the model. Without one, the
// schema's top-level "description" is used.
type Describer interface{ Description() string }

const openSchema = `{"type":"object"}`

// toolDef is the MCP definition of a gateway tool and a digest of it, so a
// reload re-registers only the tools whose definition changed.
func toolDef(name string, t gateway.Tool) (*sdk.Tool, string, error) {
	schema := openSchema
	if s, ok := t.(Schemer); ok && s.Schema() != "" {
		schema = s.Schema()
	}
	var top struct {
		Type        any    `json:"type"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(schema), &top); err != nil {
		return nil, "", fmt.Errorf("schema is not a JSON object: %w", err)
	}
	if top.Type != "object" {
		return nil, "", errors.New(`schema must have "type": "object"`)
	}
	desc := top.Description
	if d, ok := t.(Describer); ok && d.Description() != "" {
		desc = d.Description()
	}
	sum := sha256.Sum256([]byte(name + "\x00" + desc + "\x00" + schema))
	return &sdk.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(schema)}, hex.EncodeToString(sum[:]), nil
}

// notWithheld drops the tools that are withheld for now.
func notWithheld(all map[string]gateway.Tool) map[string]gateway.Tool {
	want := map[string]gateway.Tool{}
	for n, t := range all {
		if w, ok := t.(Withholder); ok && w.Withheld() != nil {
			continue
		}
		want[n] = t
	}
	return want
}

// Offered returns, sorted by name, the definitions the door offers an
// agent that may see names in snap (Options.Visible's answer). toolgate's
// own agent loop offers its model exactly these. Tools whose schema is
// unusable are left out, as the door leaves them out.
func Offered(snap *gateway.Snapshot, names []string) []*sdk.Tool {
	var defs []*sdk.Tool
	for name, t := range notWithheld(visibleTools(snap, names)) {
		if def, _, err := toolDef(name, t); err == nil {
			defs = append(defs, def)
		}
	}
	slices.SortFunc(defs, func(a, b *sdk.Tool) int { return strings.Compare(a.Name, b.Name) })
	return defs
}
