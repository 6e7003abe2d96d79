package proto

// Paths as the sandbox sees them; the host mounts and execs by them.
const (
	WorkspacePath = "/workspace"
	ToolsBinPath  = "/tools/bin"
	ClientPath    = "/tools/toolgate-client"
	// LauncherPath is the lean launcher every /tools/bin/NAME links to
	// when the host has toolgate-launch beside the client binary.
	LauncherPath = "/tools/toolgate-launch"
	RunDir       = "/run/toolgate" // tmpfs: per-call state; the agent socket dir is mounted below it
	CallsDir     = RunDir + "/calls"
	// SocketDirPath is where the agent's host socket directory is mounted
	// (read-only); the directory, not the socket, so a restarted gateway's
	// new socket is visible without recreating the container.
	SocketDirPath = RunDir + "/sock"
	SocketName    = "gateway.sock"
	SocketPath    = SocketDirPath + "/" + SocketName
	// ProxyAddr is where the client's forwarder serves HTTP proxying inside
	// a sandbox with egress; the container's loopback exists under network none.
	ProxyAddr = "127.0.0.1:3128"
)

// A sandbox's defaults, which the configuration applies and the backends
// build and run by: the image `toolgate sandbox image` builds, and the
// user the agent's processes run as (not root).
const (
	DefaultImage = "toolgate/sandbox:latest"
	DefaultUser  = "1000:1000"
)

// ValidCallID reports whether id is safe as a file name under CallsDir.
func ValidCallID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
