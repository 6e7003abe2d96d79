package proto

import "time"

// Exit codes of the launcher (/tools/bin/NAME) when the handler's own exit
// code is not available (sysexits.h where one fits); docs/protocol.md lists
// them. The launcher is C (internal/guest/launcher/c/launch.c); its tests check it
// exits with these.
const (
	LaunchExitUsage       = 64  // the gateway refused the request as malformed or too large
	LaunchExitUnavailable = 69  // gateway unreachable, or gone mid-call
	LaunchExitSoftware    = 70  // the tool failed without an exit code
	LaunchExitProtocol    = 76  // the gateway's answer made no sense
	LaunchExitDenied      = 77  // policy denied the call
	LaunchExitNotFound    = 127 // no such tool (as a shell's command not found)
)

// DialTimeout bounds a sandbox program's connect to the agent socket: a
// Unix socket answers at once, or its listener is gone (or its queue full).
const DialTimeout = 2 * time.Second
