package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
)

// argsFromArgv turns the command line of the launcher /tools/bin/SERVER.TOOL
// inside a sandbox — what the agent socket delivers as {"argv": […], "cwd": …}
// — into the upstream tool's arguments object:
//
//	SERVER.TOOL --json '{"path":"a","limit":3}'   the object, whole
//	SERVER.TOOL --path a --limit 3                one flag per field
//	SERVER.TOOL --path=a --verbose                --name=value; a bare flag is true
//
// A flag's value is taken as JSON when it parses as JSON (3, true, [1], {…})
// and as a string otherwise, so `--name 007` needs `--name '"007"'`.
func argsFromArgv(raw json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Argv []string `json:"argv"`
		Cwd  string   `json:"cwd"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("launcher arguments: %w", err)
	}
	argv := in.Argv
	if len(argv) == 2 && argv[0] == "--json" {
		if err := decodeObject(json.RawMessage(argv[1])); err != nil {
			return nil, fmt.Errorf("--json: %w", err)
		}
		return json.RawMessage(argv[1]), nil
	}
	obj := map[string]json.RawMessage{}
	for i := 0; i < len(argv); i++ {
		name, ok := strings.CutPrefix(argv[i], "--")
		if !ok || name == "" || name == "json" {
			return nil, fmt.Errorf("unexpected argument %q: use --json '{…}' or --name value flags", argv[i])
		}
		value, hasValue := "", false
		if n, v, eq := strings.Cut(name, "="); eq {
			name, value, hasValue = n, v, true
		} else if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
			i++
			value, hasValue = argv[i], true
		}
		if _, dup := obj[name]; dup {
			return nil, fmt.Errorf("--%s given twice", name)
		}
		switch {
		case !hasValue:
			obj[name] = json.RawMessage("true")
		case json.Valid([]byte(value)):
			obj[name] = json.RawMessage(value)
		default:
			obj[name], _ = json.Marshal(value)
		}
	}
	return json.Marshal(obj)
}
