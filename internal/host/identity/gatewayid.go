package identity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// IDFile holds the gateway's id in its HOME: made once, kept for good, so a
// gateway's chain keeps one name in the fleet database across restarts, and
// its log (Origin) one name for its key.
const IDFile = "gateway.id"

var idRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

// GatewayID returns the id in HOME/gateway.id, creating a random one
// (gw-<16 hex>) the first time. An operator may write a name of their own
// (letters, digits, . _ -, at most 64) before the first start.
func GatewayID(home string) (string, error) {
	path := filepath.Join(home, IDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		r := make([]byte, 8)
		_, _ = rand.Read(r)
		id := "gw-" + hex.EncodeToString(r)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			return GatewayID(home) // made by a concurrent start
		}
		if err != nil {
			return "", fmt.Errorf("gateway id: %w", err)
		}
		_, werr := f.WriteString(id + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return "", fmt.Errorf("gateway id: %w", err)
		}
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("gateway id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !idRE().MatchString(id) {
		return "", fmt.Errorf("gateway id: %s holds %q, not an id (letters, digits, . _ -, at most 64)", path, truncate(id))
	}
	return id, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
