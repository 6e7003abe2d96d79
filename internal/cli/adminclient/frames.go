package adminclient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// The wire shapes of every HTTP entry point's answers are declared here,
// where the client reads them, and written by the servers through package
// wire: the client links no net/http (a CLI run paid ~0.3 ms of CPU for
// net/http and crypto/tls linked and started, though unused).

// MediaNDJSON asks for a streamed response: one Frame per line.
const MediaNDJSON = "application/x-ndjson"

// Error is the body of every failed request and the error frame of a stream.
type Error struct {
	Code    string `json:"code"` // denied, unauthorized, bad_request, not_found, tool_error, unavailable …
	Message string `json:"message"`
	Rule    string `json:"rule,omitempty"`
	ID      string `json:"id,omitempty"` // the audit id of the call, when there is one
}

func (e *Error) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Frame is one line of a streamed response. Exactly one field is set.
type Frame struct {
	Stdout []byte          `json:"stdout,omitempty"`
	Stderr []byte          `json:"stderr,omitempty"`
	Result *gateway.Result `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// ReadFrames decodes a streamed response, copying output to stdout/stderr,
// and returns the final result or the error frame.
func ReadFrames(r io.Reader, stdout, stderr io.Writer) (*gateway.Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		var fr Frame
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber() // integers in the result stay exact (see Client.Call)
		if err := dec.Decode(&fr); err != nil {
			if serr := sc.Err(); serr != nil {
				// The stream broke mid-line: the scanner hands over the
				// part it had as a last line. The break is the news.
				return nil, fmt.Errorf("stream from gateway broken: %w", serr)
			}
			return nil, fmt.Errorf("bad frame from gateway: %w", err)
		}
		if dec.More() {
			return nil, errors.New("bad frame from gateway: trailing data")
		}
		switch {
		case fr.Stdout != nil:
			if _, err := stdout.Write(fr.Stdout); err != nil {
				return nil, err
			}
		case fr.Stderr != nil:
			if _, err := stderr.Write(fr.Stderr); err != nil {
				return nil, err
			}
		case fr.Error != nil:
			return nil, fr.Error
		case fr.Result != nil:
			return fr.Result, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stream from gateway broken: %w", err)
	}
	return nil, errors.New("stream from gateway ended without a result (gateway restarted?)")
}
