package config

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are binary multiples, as Docker reads "512m" (and Kubernetes "512Mi").
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "ki": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "mi": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "gi": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "ti": 1 << 40,
}

var errSize = errors.New("not a size")

// parseSize reads a byte count such as "512m", "2g", "1.5GiB" or "4096".
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	mult, ok := sizeUnits[strings.TrimSpace(t[i:])]
	if !ok || i == 0 {
		return 0, errSize
	}
	f, err := strconv.ParseFloat(t[:i], 64)
	if err != nil || f*mult >= math.MaxInt64 {
		return 0, errSize
	}
	return int64(f * mult), nil
}
