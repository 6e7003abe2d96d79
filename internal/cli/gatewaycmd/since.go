package gatewaycmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// sinceFlag is a look-back window: a Go duration (90m, 2h) or days (7d).
type sinceFlag time.Duration

func (s *sinceFlag) String() string {
	if *s == 0 {
		return "0"
	}
	return time.Duration(*s).String()
}

func (s *sinceFlag) Type() string { return "duration" }

func (s *sinceFlag) Set(v string) error {
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 || n > 3650 {
			return fmt.Errorf("%q: want a number of days (e.g. 7d) or a duration (e.g. 2h)", v)
		}
		*s = sinceFlag(time.Duration(n * float64(24*time.Hour)))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration (e.g. 2h, 90m) or days (e.g. 7d)", v)
	}
	*s = sinceFlag(d)
	return nil
}

// cutoff is the earliest time the window admits; zero for no window.
func (s sinceFlag) cutoff() time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(s))
}
