// Command timer runs inside a sandbox for the latency benchmarks: it starts
// ARGV -n times in sequence, with stdin from -in when given, and prints the
// wall time of one run, process start to exit, as p50/p99 in microseconds
// (JSON, with the last run's stdout). Built static by timing.Build.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 500, "runs")
	in := flag.String("in", "", "stdin file")
	flag.Parse()
	var stdin []byte
	if *in != "" {
		var err error
		if stdin, err = os.ReadFile(*in); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	var d []time.Duration
	var out bytes.Buffer
	for range *n {
		out.Reset()
		cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
		cmd.Stdin, cmd.Stdout = bytes.NewReader(stdin), &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, flag.Args(), err)
			os.Exit(1)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"p50_us": d[len(d)/2].Microseconds(), "p99_us": d[len(d)*99/100].Microseconds(), "last_stdout": out.String(),
	})
}
