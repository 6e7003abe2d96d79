// Package witness is a transparency-log witness for gateways' audit logs,
// speaking C2SP tlog-witness's add-checkpoint: it cosigns a checkpoint
// only when it is signed by the log's key and consistent with the last one
// it cosigned for that log (an RFC 6962 consistency proof), and it never
// cosigns a fork or a smaller tree after a larger one, across restarts. A
// gateway restored from an old disk, or whose log was edited and
// re-chained and re-signed with its own key, is refused here and keeps
// no cosignature for its rewritten history; the refused request is kept
// as evidence.
//
// Cosignatures are signed-note signatures (ed25519, golang.org/x/mod's
// note) by the witness's key over the checkpoint text, so a receipt's
// verifier checks them as it checks the gateway's own (proof.Options.Witnesses).
package witness

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/lib/durable"
	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Files in a witness's directory.
const (
	KeyFile     = "witness.key" // its signer key (0600)
	StateFile   = "state.json"  // the last checkpoint cosigned, per log
	EvidenceDir = "evidence"    // refused requests signed by a log's key
)

// maxProof is tlog-witness's bound on consistency proof lines.
const maxProof = 63

// Cosigned is the last checkpoint a witness cosigned for one log.
type Cosigned struct {
	Size int64     `json:"size"`
	Root tlog.Hash `json:"root"`
}

// Witness cosigns the checkpoints of the logs it knows.
type Witness struct {
	key      note.Signer
	verifier string
	logs     map[string]note.Verifiers // origin → its keys
	dir      string
	log      *slog.Logger

	mu    sync.Mutex // one add-checkpoint at a time: the check and the save are one step
	state map[string]Cosigned
}

// Open opens the witness kept in dir (making its key, named name, the
// first time) for the logs whose verifier keys are given (toolgate id
// prints a gateway's).
func Open(dir, name string, logKeys []note.Verifier, log *slog.Logger) (*Witness, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(dir, EvidenceDir), 0o700); err != nil {
		return nil, err
	}
	w := &Witness{dir: dir, log: log, logs: map[string]note.Verifiers{}, state: map[string]Cosigned{}}
	byOrigin := map[string][]note.Verifier{}
	for _, v := range logKeys {
		byOrigin[v.Name()] = append(byOrigin[v.Name()], v)
	}
	for origin, vs := range byOrigin {
		w.logs[origin] = note.VerifierList(vs...)
	}
	var err error
	if w.key, w.verifier, err = loadKey(filepath.Join(dir, KeyFile), name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &w.state); err != nil {
			return nil, fmt.Errorf("witness: %s: %v (a witness whose state is lost must be retired, not started afresh)", StateFile, err)
		}
	}
	return w, nil
}

// Verifier is the witness's verifier key: what a receipt's verifier is
// given with --witness-key.
func (w *Witness) Verifier() string { return w.verifier }

// Handler serves POST /add-checkpoint.
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, proof.MaxNote+maxProof*64+64))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		status, answer, ctype := w.Add(body)
		rw.Header().Set("Content-Type", ctype)
		rw.WriteHeader(status)
		_, _ = rw.Write(answer)
	})
	return mux
}

// Add handles one add-checkpoint request body: the status, the answer and
// its media type, as tlog-witness specifies them.
func (w *Witness) Add(body []byte) (status int, answer []byte, ctype string) {
	const text = "text/plain; charset=utf-8"
	old, proofHashes, msg, err := parseRequest(body)
	if err != nil {
		return http.StatusBadRequest, []byte(err.Error() + "\n"), text
	}
	// The origin, to know which keys to check: the note's first line.
	origin, _, _ := strings.Cut(string(msg), "\n")
	keys, ok := w.logs[origin]
	if !ok {
		return http.StatusNotFound, []byte("unknown log " + strconv.Quote(origin) + "\n"), text
	}
	cp, n, err := proof.OpenCheckpoint(msg, keys)
	if err != nil {
		return http.StatusForbidden, []byte(err.Error() + "\n"), text
	}
	if old > cp.Size {
		return http.StatusBadRequest, fmt.Appendf(nil, "old size %d is over the checkpoint's %d\n", old, cp.Size), text
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.state[origin]
	switch {
	case old != last.Size:
		return http.StatusConflict, fmt.Appendf(nil, "%d\n", last.Size), "text/x.tlog.size"
	case old == cp.Size && old > 0 && cp.Root != last.Root:
		w.keep(origin, body, "same size, another root")
		return http.StatusConflict, []byte("the checkpoint's root differs from the one cosigned at this size: a fork\n"), text
	case old == 0 && len(proofHashes) > 0:
		return http.StatusBadRequest, []byte("a proof from size 0 must be empty\n"), text
	case old > 0 && old < cp.Size:
		if err := tlog.CheckTree(proofHashes, cp.Size, cp.Root, old, last.Root); err != nil {
			w.keep(origin, body, "inconsistent with the tree cosigned")
			return http.StatusUnprocessableEntity, fmt.Appendf(nil, "not consistent with the checkpoint of %d cosigned before: %v\n", old, err), text
		}
	}
	next := map[string]Cosigned{}
	for k, v := range w.state {
		next[k] = v
	}
	next[origin] = Cosigned{Size: cp.Size, Root: cp.Root}
	if err := w.save(next); err != nil {
		return http.StatusServiceUnavailable, []byte("saving the witness's state: " + err.Error() + "\n"), text
	}
	w.state = next
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.key)
	if err != nil {
		return http.StatusInternalServerError, []byte(err.Error() + "\n"), text
	}
	// The answer is the signature lines alone.
	_, sigs, _ := bytes.Cut(signed, []byte("\n\n"))
	return http.StatusOK, sigs, text
}

// parseRequest reads "old N", up to 63 base64 hashes, an empty line, and
// the checkpoint.
func parseRequest(body []byte) (old int64, hashes []tlog.Hash, msg []byte, err error) {
	r := bufio.NewReader(bytes.NewReader(body))
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, nil, errors.New("no old size line")
	}
	s, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "old ")
	if !ok || s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, nil, nil, fmt.Errorf("bad old size line %q", strings.TrimSuffix(line, "\n"))
	}
	if old, err = strconv.ParseInt(s, 10, 64); err != nil || old < 0 {
		return 0, nil, nil, fmt.Errorf("bad old size %q", s)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, nil, errors.New("no empty line before the checkpoint")
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			break
		}
		if len(hashes) == maxProof {
			return 0, nil, nil, fmt.Errorf("more than %d proof lines", maxProof)
		}
		b, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(b) != tlog.HashSize {
			return 0, nil, nil, fmt.Errorf("proof line %q is not a base64 hash", line)
		}
		hashes = append(hashes, tlog.Hash(b))
	}
	msg, _ = io.ReadAll(r)
	return old, hashes, msg, nil
}

// save writes the state durably before the answer goes out.
func (w *Witness) save(state map[string]Cosigned) error {
	b, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(w.dir, StateFile), b, 0o600)
}

// keep files a refused request signed by a log's key: evidence of what
// the log claimed.
func (w *Witness) keep(origin string, body []byte, why string) {
	sum := sha256.Sum256(body)
	name := fmt.Sprintf("%s-%x.txt", time.Now().UTC().Format("20060102T150405Z"), sum[:6])
	path := filepath.Join(w.dir, EvidenceDir, name)
	if err := os.WriteFile(path, body, 0o600); err != nil {
		w.log.Error("witness: keeping evidence", "err", err)
	}
	w.log.Warn("witness refused a checkpoint", "log", origin, "why", why, "evidence", path)
}

// loadKey reads the witness's signer key, making one named name the first
// time, and derives its verifier key.
func loadKey(path, name string) (note.Signer, string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if name == "" {
			return nil, "", errors.New("witness: a new witness needs a name (--name)")
		}
		skey, vkey, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			return nil, "", err
		}
		if err := durable.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(path+".pub", []byte(vkey+"\n"), 0o644); err != nil {
			return nil, "", err
		}
		b = []byte(skey)
	} else if err != nil {
		return nil, "", err
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, "", fmt.Errorf("witness key %s: %v", path, err)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		return nil, "", fmt.Errorf("witness key %s.pub: %v", path, err)
	}
	return s, strings.TrimSpace(string(pub)), nil
}
