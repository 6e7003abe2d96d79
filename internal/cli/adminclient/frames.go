package adminclient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/internal/proto/api"
	"io"
)

// ReadFrames decodes a streamed response, copying output to stdout/stderr,
// and returns the final result or the error frame.
func ReadFrames(r io.Reader, stdout, stderr io.Writer) (*api.Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		var fr api.Frame
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
