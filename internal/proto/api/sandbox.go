package api

import "time"

// Sandbox is one row of `toolgate sandbox ls`: a toolgate sandbox the
// backend holds, of this home or another's.
type Sandbox struct {
	Agent string `json:"agent"`
	// Place is where it stands for this home: configured, not configured,
	// other home, left behind, home unknown.
	Place    string    `json:"place"`
	Home     string    `json:"home,omitempty"`
	Instance string    `json:"instance"`
	Name     string    `json:"name"`
	ID       string    `json:"id"`
	Image    string    `json:"image"`
	State    string    `json:"state"`
	Runtime  string    `json:"runtime,omitempty"`
	Backend  string    `json:"backend"`
	Created  time.Time `json:"created,omitzero"`
	// Workspace is its host directory and the bytes of the files in it;
	// WorkspaceBytes is -1 when there is none to measure (a claim).
	Workspace      string `json:"workspace,omitempty"`
	WorkspaceBytes int64  `json:"workspaceBytes"`
	// InFlight and Waiting are the calls running in it and waiting for
	// their turn, as the gateway serving this home counts them.
	InFlight int `json:"inFlight,omitempty"`
	Waiting  int `json:"waiting,omitempty"`
}

// SandboxAction asks for a sandbox to be stopped or removed, or for a
// prune.
type SandboxAction struct {
	// Force acts on a sandbox with calls in flight, cutting them.
	Force bool `json:"force,omitempty"`
	// Workspace (rm) removes the agent's workspace too; Workspaces
	// (prune) the workspaces, under the home, of the agents it prunes.
	Workspace  bool `json:"workspace,omitempty"`
	Workspaces bool `json:"workspaces,omitempty"`
	// DryRun (prune) says what would go, and removes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Unknown (prune) takes the sandboxes of homes that did not say where
	// they are too.
	Unknown bool `json:"unknown,omitempty"`
}

// SandboxActed is what a stop, rm or prune did.
type SandboxActed struct {
	Action     string    `json:"action"`
	Sandboxes  []Sandbox `json:"sandboxes"`
	Workspaces []string  `json:"workspaces,omitempty"`
	// Entries are the audit entries that record it, one per sandbox; none
	// when no gateway served the home (the action is then on no record).
	Entries []string `json:"entries,omitempty"`
	DryRun  bool     `json:"dryRun,omitempty"`
}
