// Package proto is the protocol between a sandbox and the gateway: the
// in-sandbox layout the host mounts and execs by, the routes and headers of
// the agent socket, the proxy credential that attributes a process's
// connections to its call, and the warm executor's frames.
//
// Both sides import it; it imports nothing of ours, so the in-sandbox
// binaries (toolgate-client, toolgate-launch) get the protocol without
// linking the host's gateway, guard or servers.
// docs/protocol.md describes the same protocol for people.
package proto
