package sandbox

import "path/filepath"

// ExecDir is the host directory mounted read-write at proto.ExecDirPath,
// where the warm executor serves: a sibling of the workspace, owned by the
// sandbox user. Everything in it is the sandbox's to change; the host must
// not trust it.
func (s AgentSpec) ExecDir() string {
	return filepath.Join(filepath.Dir(filepath.Clean(s.Workspace)), "exec")
}
