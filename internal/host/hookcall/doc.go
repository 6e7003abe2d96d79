// Package hookcall is the host's half of the Claude Code hook mapping: hook
// input onto the gateway's call model (ToCall), the one gateway tool that
// serves every hook call (Tool), and stream-json transcripts read as
// observations (ReadStreamJSON). The hook server, policy explain and replay
// use it; the in-sandbox client never links it (internal/proto/hooks is its half).
package hookcall
