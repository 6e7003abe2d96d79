package rootfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ClaudeCodeVersion is the Claude Code CLI the claude-code profile installs.
const ClaudeCodeVersion = "2.1.328"

// agentBase is the Debian system agent images share: a shell, git, the CA
// certificates (TLS through the egress tunnel) and what a typical coding
// task runs.
var agentBase = debianBase{Suite: "bookworm", Packages: []string{
	"bash", "ca-certificates", "coreutils", "findutils", "git", "grep", "less", "patch",
	"procps", "python3", "ripgrep", "sed", "curl",
}}

// claudeCode is Debian with the Claude Code CLI: npm's platform package
// ships it as one native glibc executable, so the image needs no Node.js.
type claudeCode struct{}

func init() { Register(claudeCode{}) }

func (claudeCode) Name() string { return "claude-code" }
func (claudeCode) Summary() string {
	return "Debian " + agentBase.Suite + " (git, python3, ripgrep, curl) with the Claude Code CLI " + ClaudeCodeVersion
}
func (claudeCode) Tag() string     { return "toolgate/claude-code:latest" }
func (claudeCode) Version() string { return agentBase.key() + "+claude-code-" + ClaudeCodeVersion }

// Env points Claude Code's state at /tmp: the root is read-only, and the
// workspace is the user's project, not the place for a CLI's settings.
func (claudeCode) Env() []string { return []string{"HOME=/tmp", "DISABLE_AUTOUPDATER=1"} }

func (claudeCode) Write(ctx context.Context, env Env, w io.Writer) error {
	arch, err := npmArch()
	if err != nil {
		return err
	}
	base, err := agentBase.tarball(ctx, env)
	if err != nil {
		return err
	}
	pkg := npmPackage{"@anthropic-ai/claude-code-linux-" + arch, ClaudeCodeVersion}
	mods, err := pkg.install(ctx, env)
	if err != nil {
		return err
	}
	bin := filepath.Join(mods, filepath.FromSlash(pkg.Name), "claude")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s has no claude executable: %w", pkg, err)
	}
	t := newTarWriter(w)
	if err := writeDebian(t, base); err != nil {
		return err
	}
	t.hostFile("usr/local/bin/claude", 0o755, bin)
	t.dir("workspace", 0o755, AgentUID)
	// Where a managed-settings file is mounted read-only (the hooks no
	// project setting can switch off).
	t.dir("etc/claude-code", 0o755, 0)
	return t.close()
}
