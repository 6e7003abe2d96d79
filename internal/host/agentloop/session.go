package agentloop

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/model"
)

// Session is one task's conversation, kept in HOME/sessions/ID.json after
// every step so `toolgate agent --continue ID` picks it up where it ended.
type Session struct {
	ID       string      `json:"id"`
	Agent    string      `json:"agent"`
	Provider string      `json:"provider"`
	API      model.API   `json:"api"`
	Model    string      `json:"model"`
	Created  time.Time   `json:"created"`
	Updated  time.Time   `json:"updated"`
	Steps    int         `json:"steps"`
	Usage    model.Usage `json:"usage"`
	Stop     string      `json:"stop,omitempty"` // how its last run ended
	Messages []Message   `json:"messages"`
}

// Store keeps sessions on disk and knows which ones are running.
type Store struct {
	dir     string
	mu      sync.Mutex
	running map[string]bool
}

// SessionsDir is where a home keeps its agent sessions.
func SessionsDir(home string) string { return filepath.Join(home, "sessions") }

// NewStore keeps sessions in dir.
func NewStore(dir string) *Store { return &Store{dir: dir, running: map[string]bool{}} }

var validID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

// ErrNoSession is a session id the store does not hold.
var ErrNoSession = errors.New("no such session")

// Load reads a session.
func (s *Store) Load(id string) (*Session, error) {
	if !validID().MatchString(id) {
		return nil, fmt.Errorf("%w: %q is not a session id (32 hex digits)", ErrNoSession, id)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSession, id)
	}
	if err != nil {
		return nil, err
	}
	var sess Session
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &sess, nil
}

// Save writes a session atomically (0600: it holds what the agent saw).
// It does not fsync: the audit log is the durable record; a session file
// serves resuming, and the rename keeps it whole when the process dies.
// (An fsync per step cost 7 ms a step on a busy disk, BenchmarkLoopStep.)
func (s *Store) Save(sess *Session) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	sess.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(sess, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, "."+sess.ID+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(s.dir, sess.ID+".json"))
}

// claim marks a session running; false when it already is.
func (s *Store) claim(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] {
		return false
	}
	s.running[id] = true
	return true
}

func (s *Store) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, id)
}
