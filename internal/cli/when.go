package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WhenFlag is a point in time for --since and --until: how long ago (a
// Go duration such as 90m or 2h, or days such as 7d) or an RFC 3339 time.
// Both flags take both forms, so "from 3h ago until 2h ago", or a window
// copied from an incident report, needs no clock arithmetic.
type WhenFlag struct {
	t   time.Time
	raw string
}

func (w *WhenFlag) String() string { return w.raw }

func (w *WhenFlag) Type() string { return "when" }

func (w *WhenFlag) Set(v string) error {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		w.t, w.raw = t, v
		return nil
	}
	ago, err := lookBack(v)
	if err != nil {
		return err
	}
	w.t, w.raw = time.Now().Add(-ago), v
	return nil
}

// lookBack reads "how long ago": a Go duration or a number of days.
func lookBack(v string) (time.Duration, error) {
	bad := fmt.Errorf("%q: want how long ago (e.g. 2h, 90m, 7d) or an RFC 3339 time (e.g. 2026-12-01T08:00:00Z)", v)
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 || n > 3650 {
			return 0, bad
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, bad
	}
	return d, nil
}

// Cutoff is the time given; zero when the flag was not.
func (w WhenFlag) Cutoff() time.Time { return w.t }
