// Command timer runs a command N times in sequence inside a sandbox and
// prints the p50 and p99 wall time of one run, process start included.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 500, "runs")
	flag.Parse()
	argv := flag.Args()
	ds := make([]time.Duration, 0, *n)
	for range *n {
		start := time.Now()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "%v: %v: %s\n", argv, err, out)
			os.Exit(1)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	fmt.Printf("%d %d\n", ds[len(ds)/2].Microseconds(), ds[len(ds)*99/100].Microseconds())
}
