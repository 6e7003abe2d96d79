package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/host/config"
)

// ClientBinary finds the static in-sandbox client: the configured path, else
// toolgate-client next to the running executable.
func ClientBinary(cfg *config.Config) (string, error) {
	p := cfg.Gateway.ClientBinary
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		p = filepath.Join(filepath.Dir(exe), "toolgate-client")
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the in-sandbox client %s is missing: build it with `CGO_ENABLED=0 go build -o %s ./cmd/toolgate-client` or set gateway.clientBinary", p, p)
	}
	return p, nil
}
