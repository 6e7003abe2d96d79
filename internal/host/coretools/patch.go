package coretools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Patch is the `patch` core tool: replace text that occurs exactly once, or
// apply a unified diff strictly. On any error the file is left unchanged.
type Patch struct{ *shared }

type patchArgs struct {
	Path string  `json:"path"`
	Old  *string `json:"old"`
	New  *string `json:"new"`
	Diff *string `json:"diff"`
}

// PatchOutput is the result body of `patch`; one of Replacements and Hunks is set.
type PatchOutput struct {
	Path         string `json:"path"`
	Bytes        int    `json:"bytes"`
	Replacements int    `json:"replacements,omitempty"`
	Hunks        int    `json:"hunks,omitempty"`
}

func (*Patch) Name() string       { return "patch" }
func (*Patch) Kind() gateway.Kind { return gateway.KindCore }

// parse checks the arguments; for a diff it returns the parsed hunks.
func (t *Patch) parse(raw json.RawMessage) (*patchArgs, []hunk, error) {
	var a patchArgs
	if err := decodeArgs("patch", raw, &a); err != nil {
		return nil, nil, err
	}
	switch {
	case a.Diff != nil && (a.Old != nil || a.New != nil):
		return nil, nil, fmt.Errorf("patch: give either old and new, or diff, not both")
	case a.Diff != nil:
		hunks, err := parseDiff(*a.Diff)
		if err != nil {
			return nil, nil, fmt.Errorf("patch: %w", err)
		}
		return &a, hunks, nil
	case a.Old == nil && a.New == nil:
		return nil, nil, fmt.Errorf("patch: give old and new (replace text occurring exactly once), or diff (a unified diff)")
	case a.Old == nil || *a.Old == "":
		return nil, nil, fmt.Errorf("patch: old is required and must not be empty")
	case a.New == nil:
		return nil, nil, fmt.Errorf("patch: new is required (use \"\" to delete the old text)")
	}
	return &a, nil, nil
}

func (t *Patch) Prepare(call *gateway.Call, agent gateway.AgentInfo) error {
	a, _, err := t.parse(call.Args)
	if err != nil {
		return err
	}
	if call.Path, err = resolvePath("path", a.Path, agent); err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	return nil
}

func (t *Patch) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	ctx, cancel := t.fileDeadline(ctx, call.Agent)
	defer cancel()
	a, hunks, err := t.parse(call.Args)
	if err != nil {
		return nil, err
	}
	if call.Path == "" {
		return nil, errNotPrepared
	}
	if env.Sandbox == nil {
		return nil, errNoSandbox
	}
	max := t.limitsOf(call.Agent).MaxWrite
	defer t.lock(call.Agent, call.Path)()
	f, err := env.Sandbox.ReadFile(ctx, call.Path, max)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", call.Path, err)
	}
	if f.Size > int64(len(f.Data)) {
		return nil, fmt.Errorf("patch %s: file is %d bytes, over the write limit of %d bytes", call.Path, f.Size, max)
	}
	out := &PatchOutput{Path: call.Path}
	var updated string
	if hunks != nil {
		if updated, err = applyDiff(string(f.Data), hunks); err != nil {
			return nil, fmt.Errorf("patch %s: file unchanged: %w", call.Path, err)
		}
		out.Hunks = len(hunks)
	} else {
		content := string(f.Data)
		switch n := countMatches(content, *a.Old); n {
		case 1:
			updated = strings.Replace(content, *a.Old, *a.New, 1)
			out.Replacements = 1
		case 0:
			return nil, fmt.Errorf("patch %s: file unchanged: old text not found (it must match exactly once, whitespace included)", call.Path)
		default:
			return nil, fmt.Errorf("patch %s: file unchanged: old text matches %d times; it must match exactly once (add surrounding lines to make it unique)", call.Path, n)
		}
	}
	if int64(len(updated)) > max {
		return nil, fmt.Errorf("patch %s: file unchanged: the result would be %d bytes, over the write limit of %d bytes", call.Path, len(updated), max)
	}
	if err := env.Sandbox.WriteFile(ctx, call.Path, []byte(updated)); err != nil {
		return nil, fmt.Errorf("patch %s: %w", call.Path, err)
	}
	out.Bytes = len(updated)
	return &gateway.Result{Output: out}, nil
}

// countMatches counts occurrences of old in s, overlapping ones included:
// "aa" in "aaa" is ambiguous, so it counts twice.
func countMatches(s, old string) int {
	n := 0
	for i := 0; ; n++ {
		j := strings.Index(s[i:], old)
		if j < 0 {
			return n
		}
		i += j + 1
	}
}
