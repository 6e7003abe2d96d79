package api

import "time"

// Pending is a call waiting for a person, as a person is shown it: every
// fact, secrets redacted.
type Pending struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	Kind   Kind   `json:"kind"`
	Tool   string `json:"tool"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	// Digest is what an approval binds: with --same-args a standing
	// approval allows only calls of this digest.
	Digest  string        `json:"digest"`
	Args    string        `json:"args"` // the arguments as sent, secrets redacted
	Input   *PendingInput `json:"input,omitempty"`
	Command string        `json:"command,omitempty"`
	Argv    []string      `json:"argv,omitempty"`
	Path    string        `json:"path,omitempty"`
	Host    string        `json:"host,omitempty"`
	Port    int           `json:"port,omitempty"`
	Session string        `json:"session,omitempty"`
	// Labels are what the call's session had been given, AgentLabels
	// what every session of its agent had (the default scope rules read).
	Labels      map[string]Label `json:"labels,omitempty"`
	AgentLabels map[string]Label `json:"agentLabels,omitempty"`
	// Policy is the version of the policy that asked (the configuration's
	// digest): an answer by link is bound to it.
	Policy   string    `json:"policy,omitempty"`
	Asked    time.Time `json:"asked"`
	Deadline time.Time `json:"deadline"`
}

// Labels are an agent's session labels (GET /v1/agents/AGENT/labels),
// and what a clear took away (POST …/labels/clear, with a Reason).
type Labels struct {
	Agent  string           `json:"agent"`
	Labels map[string]Label `json:"labels"`
	Reason string           `json:"reason,omitempty"`
	Entry  string           `json:"entry,omitempty"` // the audit id of the clear
}

// Label is where a session label came from: the call that gave it first.
type Label struct {
	Call   string    `json:"call"`
	At     time.Time `json:"at"`
	Tool   string    `json:"tool"`
	Kind   Kind      `json:"type"`
	Target string    `json:"target,omitempty"` // the path, host:port or model the call reached
}

// PendingInput is a waiting call's standard input as a person is shown it.
type PendingInput struct {
	Bytes  int    `json:"bytes"`  // the whole input's size, as the tool gets it
	SHA256 string `json:"sha256"` // of the whole input, as the tool gets it
	Data   []byte `json:"data"`   // the input, secrets redacted (base64 in JSON: it may be any bytes)
	// Cut is how many bytes of Data a list left out; the call's own page
	// (GET /v1/approvals/ID) shows them.
	Cut int `json:"cut,omitempty"`
}

// ApprovalAnswer is a person's answer to a call waiting for approval.
type ApprovalAnswer struct {
	Approve  bool   `json:"approve"`
	Reason   string `json:"reason,omitempty"`
	For      string `json:"for,omitempty"` // a duration: the approval stands this long
	SameArgs bool   `json:"same_args,omitempty"`
	// Raise gives a task at its budget new caps (cost=4,calls=1000).
	Raise string `json:"raise,omitempty"`
}
