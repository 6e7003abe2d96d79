package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/gateway"
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
