package hooks

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Spool file layout: one ev-<id>.json per event, written as .tmp-* and
// renamed into place, so a reader never sees a file being written.
const (
	spoolPrefix  = "ev-"
	spoolSuffix  = ".json"
	tempPrefix   = ".tmp-"
	quarantine   = "quarantine"
	maxSpoolFile = 2*DefaultMaxInput + 4096 // an envelope around one bounded input
)

// ErrRejected marks a delivery the receiver refused for good (the event
// itself is unacceptable: malformed, too large, an unknown agent). A retry
// cannot succeed, so Drain moves such an event to quarantine/ instead of
// stopping the queue behind it for ever, and a tap does not spool it.
var ErrRejected = errors.New("event rejected by the gateway")

// DefaultStaleTemp is how old a temp file must be before Drain takes it for
// the leftover of a crashed Put rather than one still being written.
const DefaultStaleTemp = time.Minute

// Event is one undeliverable tap event. ID is its stable event id (EventID);
// Body is opaque to the spool.
type Event struct {
	ID   string          `json:"id"`
	Body json.RawMessage `json:"body"`
}

// envelope is a spool file: the event, its place in the queue and a checksum
// that tells a complete file from a torn one.
type envelope struct {
	V    int             `json:"v"`
	Seq  int64           `json:"seq"`
	ID   string          `json:"id"`
	Body json.RawMessage `json:"body"`
	Sum  string          `json:"sum"`
}

// Spool keeps tap events that could not be delivered, in a directory inside
// the sandbox, until Drain hands them to the gateway. Delivery is at least
// once; the receiver makes it exactly once by deduplicating on Event.ID.
type Spool struct {
	Dir       string
	StaleTemp time.Duration // default DefaultStaleTemp
}

// OpenSpool creates the directory (private to the sandbox user) if needed.
func OpenSpool(dir string) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return &Spool{Dir: dir}, nil
}

// Put stores an event durably: temp file, fsync, rename, fsync of the
// directory. An event already spooled under the same id is left as it is,
// keeping its place in the queue.
func (s *Spool) Put(ev Event) error {
	if !validID(ev.ID) {
		return fmt.Errorf("spool: invalid event id %q", ev.ID)
	}
	if !json.Valid(ev.Body) {
		return fmt.Errorf("spool: event %s: body is not JSON", ev.ID)
	}
	final := filepath.Join(s.Dir, spoolPrefix+ev.ID+spoolSuffix)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	// marshal (no HTML escaping) keeps the body byte-identical, compacted,
	// so the checksum read back matches the one written.
	data := marshal(envelope{V: 1, Seq: time.Now().UnixNano(), ID: ev.ID, Body: ev.Body, Sum: checksum(ev.Body)})
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.Dir, tempPrefix+ev.ID+"-"+hex.EncodeToString(rnd[:]))
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spool: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spool: %w", err)
	}
	return syncDir(s.Dir)
}

// Drain delivers spooled events oldest first and removes each once fn
// succeeds. It stops at the first delivery error (the gateway is still away;
// order is kept for the next drain) and returns how many were delivered.
// Corrupt files, stale temp files and events fn rejects for good
// (ErrRejected) are moved to quarantine/ and skipped.
func (s *Spool) Drain(fn func(Event) error) (int, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	stale := s.StaleTemp
	if stale <= 0 {
		stale = DefaultStaleTemp
	}
	type item struct {
		env  envelope
		path string
	}
	var queue []item
	for _, de := range entries {
		name := de.Name()
		p := filepath.Join(s.Dir, name)
		switch {
		case de.IsDir():
		case strings.HasPrefix(name, tempPrefix):
			if info, err := de.Info(); err == nil && time.Since(info.ModTime()) > stale {
				s.quarantine(name)
			}
		case strings.HasPrefix(name, spoolPrefix) && strings.HasSuffix(name, spoolSuffix):
			env, err := readEnvelope(p)
			if err != nil || spoolPrefix+env.ID+spoolSuffix != name {
				s.quarantine(name)
				continue
			}
			queue = append(queue, item{env, p})
		}
	}
	sort.Slice(queue, func(i, j int) bool {
		if queue[i].env.Seq != queue[j].env.Seq {
			return queue[i].env.Seq < queue[j].env.Seq
		}
		return queue[i].env.ID < queue[j].env.ID
	})
	n := 0
	for _, it := range queue {
		if err := fn(Event{ID: it.env.ID, Body: it.env.Body}); errors.Is(err, ErrRejected) {
			s.quarantine(filepath.Base(it.path))
			continue
		} else if err != nil {
			return n, fmt.Errorf("spool: delivering %s: %w", it.env.ID, err)
		}
		n++
		if err := os.Remove(it.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Delivered but still on disk: the next drain delivers it again,
			// which the receiver's dedup by id absorbs.
			return n, fmt.Errorf("spool: %w", err)
		}
	}
	return n, nil
}

// quarantine moves a bad file aside so it is kept for inspection but never
// blocks the queue. Failing that, it is left where it is and skipped again.
func (s *Spool) quarantine(name string) {
	q := filepath.Join(s.Dir, quarantine)
	if os.MkdirAll(q, 0o700) == nil {
		_ = os.Rename(filepath.Join(s.Dir, name), filepath.Join(q, name))
	}
}

func readEnvelope(p string) (envelope, error) {
	var env envelope
	f, err := os.Open(p)
	if err != nil {
		return env, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSpoolFile+1))
	if err != nil {
		return env, err
	}
	if len(data) > maxSpoolFile {
		return env, errors.New("spool file too large")
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return env, err
	}
	if env.V != 1 || !validID(env.ID) || env.Sum != checksum(env.Body) {
		return env, errors.New("spool file fails its checksum")
	}
	return env, nil
}

func checksum(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		b = buf.Bytes()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// validID keeps event ids usable as file names.
func validID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func writeSynced(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}
