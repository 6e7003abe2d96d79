package agentloop

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// SkillTool is the one tool the loop serves itself: reading a skill the
// MCP door would list to the agent as a skill:// resource.
const SkillTool = "read_skill"

const skillSchema = `{"type":"object","description":"Read a skill (instructions for a kind of task) by its skill:// URI, as listed in the system prompt.","properties":{"uri":{"type":"string","description":"The skill's URI, e.g. skill://global/NAME."}},"required":["uri"],"additionalProperties":false}`

// toolSet is the tools offered to the model: the MCP door's definitions
// under names both APIs accept, and the way back to the gateway's names.
type toolSet struct {
	offers []Offer
	byName map[string]string // offered name → gateway tool name
}

// Model APIs take tool names of [a-zA-Z0-9_-]{1,64}; an upstream MCP
// server's tools are SERVER.TOOL.
var badNameChar = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_-]`) })

// buildTools offers what the MCP door offers an agent that may see names,
// plus read_skill when there are skills.
func buildTools(snap *gateway.Snapshot, names []string, skills bool) toolSet {
	ts := toolSet{byName: map[string]string{}}
	for _, def := range mcp.Offered(snap, names) {
		schema, _ := json.Marshal(def.InputSchema)
		ts.add(def.Name, def.Description, schema)
	}
	if skills {
		ts.add(SkillTool, "", json.RawMessage(skillSchema))
	}
	return ts
}

func (ts *toolSet) add(name, desc string, schema json.RawMessage) {
	offered := badNameChar().ReplaceAllString(name, "_")
	if len(offered) > 60 {
		offered = offered[:60]
	}
	base := offered
	for i := 2; ts.byName[offered] != ""; i++ {
		offered = fmt.Sprintf("%s_%d", base, i)
	}
	if desc == "" {
		var top struct{ Description string }
		_ = json.Unmarshal(schema, &top)
		desc = top.Description
	}
	ts.byName[offered] = name
	ts.offers = append(ts.offers, Offer{Name: offered, Description: desc, Schema: topLevelObject(schema)})
}

// topLevelObject drops the combinators at a schema's top level: the
// Anthropic and OpenAI APIs refuse a tool whose input schema has oneOf,
// anyOf, allOf or not there (the core tools' "command or argv", "old/new
// or diff"). The description states the alternatives, and the tool still
// checks them: a call that breaks them is refused with the reason.
func topLevelObject(schema json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(schema, &m) != nil {
		return schema
	}
	cut := false
	for _, k := range []string{"oneOf", "anyOf", "allOf", "not"} {
		if _, ok := m[k]; ok {
			delete(m, k)
			cut = true
		}
	}
	if !cut {
		return schema
	}
	out, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return out
}

// resultText is what the model gets back from a gateway call: the MCP
// door's tool result, as text.
func resultText(call *gateway.Call, res *gateway.Result, err error) (string, bool) {
	r := mcp.ToResult(call, res, err)
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n"), r.IsError
}
