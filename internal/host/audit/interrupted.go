package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Interrupted is the error of the result entry Open writes (with
// Options.CloseInterrupted) for a call that was allowed but whose result
// never reached the log: the gateway stopped while it ran.
const Interrupted = "interrupted: the gateway stopped before the call's result was recorded"

// cleanMark follows the hash in the head file after a Close that left no
// allowed call without its result; Open clears it. With it, Open needs no
// look for open calls at all.
const cleanMark = "clean\n"

// maxOpenScan bounds how much of the log's end Open reads for calls left
// open by an unclean stop, so start-up does not grow with the log. A call
// whose decision lies further back stays open (Open logs how far it read).
var maxOpenScan int64 = 16 << 20

// allowed reports whether e is the decision of a call that then ran.
func allowed(e *gateway.Entry) bool {
	return e.Phase == gateway.PhaseDecision && e.Decision == (gateway.Decision{Allow: true}).Verdict()
}

// track follows the calls this writer saw allowed and not yet finished.
func (w *Writer) track(e *gateway.Entry) {
	switch {
	case allowed(e):
		w.open[e.ID] = struct{}{}
	case e.Phase == gateway.PhaseResult:
		delete(w.open, e.ID)
	}
}

// readClean reports whether the head file carries the clean mark, and
// clears it: from now on the log is being written again.
func readClean(head *os.File) (bool, error) {
	b := make([]byte, len(cleanMark))
	n, _ := head.ReadAt(b, hashHexLen+1)
	if n == len(b) && string(b) == cleanMark {
		if err := head.Truncate(hashHexLen + 1); err != nil {
			return false, fmt.Errorf("audit: head: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// markClean writes the clean mark behind the head when the writer stops
// with every allowed call finished and everything written. Only a writer
// that knows every unfinished call can say so.
func (w *Writer) markClean() error {
	if !w.openKnown || len(w.open) > 0 || len(w.retry) > 0 || w.lost != nil || w.broken || w.headStale {
		return nil
	}
	if _, err := w.head.WriteAt(fmt.Appendf(nil, "%-*s\n%s", hashHexLen, w.durable, cleanMark), 0); err != nil {
		return fmt.Errorf("audit: head: %w", err)
	}
	return w.head.Sync()
}

// closeInterrupted writes an Interrupted result for every allowed call at
// the end of the log that has no result. It reads at most maxOpenScan bytes
// back: from the end of audit.jsonl, and of the newest rotated file when
// audit.jsonl is shorter.
func (w *Writer) closeInterrupted() error {
	files, err := allFiles(w.dir)
	if err != nil {
		return err
	}
	if len(files) > 2 {
		files = files[len(files)-2:]
	}
	budget := maxOpenScan
	type span struct {
		path     string
		from, to int64
	}
	var spans []span
	for i := len(files) - 1; i >= 0 && budget > 0; i-- {
		fi, err := os.Stat(files[i])
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		from := max(0, fi.Size()-budget)
		budget -= fi.Size() - from
		spans = append([]span{{files[i], from, fi.Size()}}, spans...)
	}
	open := map[string]*gateway.Entry{}
	var order []string
	for _, s := range spans {
		if err := scanSpan(s.path, s.from, s.to, func(e *gateway.Entry) {
			switch {
			case allowed(e):
				if _, dup := open[e.ID]; !dup {
					order = append(order, e.ID)
				}
				open[e.ID] = e
			case e.Phase == gateway.PhaseResult:
				delete(open, e.ID)
			}
		}); err != nil {
			return err
		}
	}
	if budget <= 0 {
		w.log.Info("audit: looked for interrupted calls in the end of the log only", "bytes", maxOpenScan)
	}
	var errs []error
	n := 0
	for _, id := range order {
		d, ok := open[id]
		if !ok {
			continue
		}
		r := &gateway.Entry{TS: time.Now().UTC(), ID: d.ID, Phase: gateway.PhaseResult, Agent: d.Agent, Type: d.Type,
			Tool: d.Tool, Via: d.Via, Decision: d.Decision, Rule: d.Rule, Session: d.Session, Parent: d.Parent, Error: Interrupted}
		if err := w.Append(r); err != nil {
			errs = append(errs, fmt.Errorf("closing interrupted call %s: %w", id, err))
			continue
		}
		n++
	}
	if n > 0 {
		w.log.Warn("audit: recorded calls interrupted by the last stop", "calls", n)
	}
	return errors.Join(errs...)
}

// scanSpan calls fn for each complete entry line in [from, to) of path,
// skipping the partial line at from when from is mid-line.
func scanSpan(path string, from, to int64, fn func(*gateway.Entry)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	// From the byte before from, so a line starting exactly at from is kept:
	// everything up to the first newline is the tail of an earlier line.
	start := max(0, from-1)
	r := bufio.NewReaderSize(io.NewSectionReader(f, start, to-start), 64<<10)
	for from > 0 {
		_, err := r.ReadSlice('\n')
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil
		}
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // EOF, or a torn end: only complete lines count
		}
		var e gateway.Entry
		if json.Unmarshal(bytes.TrimSuffix(line, []byte{'\n'}), &e) == nil && e.ID != "" {
			fn(&e)
		}
	}
}
