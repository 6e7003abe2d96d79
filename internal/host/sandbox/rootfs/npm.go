package rootfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// npmPackage is a package installed from the npm registry into the cache,
// one directory per name and version.
type npmPackage struct{ Name, Version string }

func (p npmPackage) String() string { return p.Name + "@" + p.Version }

// InstallNPM returns the node_modules directory holding npm package
// name@version, installed into the cache (once per version and cpu).
// Install scripts do not run: what is taken from a package is named file
// by file.
func InstallNPM(ctx context.Context, env Env, name, version string) (string, error) {
	return npmPackage{name, version}.install(ctx, env)
}

func (p npmPackage) install(ctx context.Context, env Env) (string, error) {
	dir := filepath.Join(env.cache(), "npm", strings.NewReplacer("/", "+", "@", "").Replace(p.Name)+"-"+p.Version+"-"+runtime.GOARCH)
	err := cached(env, dir, func(tmp string) error {
		if _, err := exec.LookPath("npm"); err != nil {
			return fmt.Errorf("npm is not installed; it fetches %s: apt-get install npm (or install Node.js)", p)
		}
		env.logf("installing %s from npm (cached in %s)", p, filepath.Dir(dir))
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		return runTool(exec.CommandContext(ctx, "npm", "install", "--prefix", tmp, "--no-audit", "--no-fund",
			"--ignore-scripts", "--omit=dev", "--no-save", p.String()), "npm install "+p.String())
	})
	return filepath.Join(dir, "node_modules"), err
}

// npmArch is the cpu name of npm's platform packages for this host.
func npmArch() (string, error) {
	switch runtime.GOARCH {
	case "amd64":
		return "x64", nil
	case "arm64":
		return "arm64", nil
	}
	return "", errors.New("agent images are built for amd64 and arm64 hosts only, this is " + runtime.GOARCH)
}
